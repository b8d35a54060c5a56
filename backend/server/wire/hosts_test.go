package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gseproc/model"
)

func TestParseHostText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want model.Host
		err  string
	}{
		{"0:10.0.0.1", model.Host{IP: "10.0.0.1"}, ""},
		{"7:FD00::0001", model.Host{IP: "fd00::1", CloudID: 7}, ""},
		{"0:::ffff:10.0.0.1", model.Host{IP: "10.0.0.1"}, ""},
		{"10.0.0.1", model.Host{}, "want cloud:ip"},
		{" 0:10.0.0.1", model.Host{}, "cloud id"},
		{"0:10.0.0.1 ", model.Host{}, "not an IP address"},
		{"+1:10.0.0.1", model.Host{}, "cloud id"},
		{"01:10.0.0.1", model.Host{}, "cloud id"},
		{"-1:10.0.0.1", model.Host{}, "cloud id"},
		{"0:10.0.0.256", model.Host{}, "not an IP address"},
		{"0:fe80::1%eth0", model.Host{}, "zone"},
		{"0:" + strings.Repeat("1", 200), model.Host{}, "characters"},
	} {
		h, err := ParseHostText(c.in)
		if c.err == "" && (err != nil || h != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseHostText(%q) = %+v, %v; want %+v, %q", c.in, h, err, c.want, c.err)
		}
	}
}

// TestHostsJSON: Hosts marshals compact and reads both forms, mixed.
func TestHostsJSON(t *testing.T) {
	hs := Hosts{{IP: "10.0.0.1"}, {IP: "fd00::1", CloudID: 3}, {IP: `a"b`, CloudID: 1}}
	b, err := json.Marshal(struct {
		H Hosts `json:"hosts"`
	}{hs})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"hosts":["0:10.0.0.1","3:fd00::1","1:a\"b"]}`; string(b) != want {
		t.Fatalf("marshal: %s, want %s", b, want)
	}
	var back Hosts
	if err := json.Unmarshal([]byte(`["0:10.0.0.1", {"ip": "fd00::1", "bk_cloud_id": 3}, null]`), &back); err != nil {
		t.Fatal(err)
	}
	if want := (Hosts{{IP: "10.0.0.1"}, {IP: "fd00::1", CloudID: 3}, {}}); !reflect.DeepEqual(back, want) {
		t.Fatalf("unmarshal: %+v, want %+v", back, want)
	}
	if err := json.Unmarshal([]byte(`["0:10.0.0.1", "x"]`), &back); err == nil || !strings.Contains(err.Error(), "hosts[1]") {
		t.Fatalf("a bad text: %v, want an error naming hosts[1]", err)
	}
	var none Hosts = Hosts{{IP: "x"}}
	if err := json.Unmarshal([]byte(`null`), &none); err != nil || none != nil {
		t.Fatalf("null: %v %+v", err, none)
	}
	if b, _ := json.Marshal(Hosts(nil)); string(b) != "null" {
		t.Fatalf("nil: %s", b)
	}
}
