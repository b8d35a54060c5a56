package model

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLabelsDecode(t *testing.T) {
	cases := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{`{"a":"x","b":42,"c":-1.50,"d":true,"e":false,"f":1e3}`, map[string]string{"a": "x", "b": "42", "c": "-1.50", "d": "true", "e": "false", "f": "1e3"}, ""},
		{`null`, nil, ""},
		{`{}`, map[string]string{}, ""},
		{`{"a":null}`, nil, "labels.a"},
		{`{"a":[1]}`, nil, "array"},
		{`{"a":{"b":1}}`, nil, "object"},
		{`[1]`, nil, "cannot unmarshal"},
	}
	for _, tc := range cases {
		var m struct {
			Labels Labels `json:"labels"`
		}
		err := json.Unmarshal([]byte(`{"labels":`+tc.in+`}`), &m)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one saying %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if (tc.want == nil) != (m.Labels == nil) || len(m.Labels) != len(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.in, m.Labels, tc.want)
		}
		for k, v := range tc.want {
			if m.Labels[k] != v {
				t.Errorf("%s: %s = %q, want %q", tc.in, k, m.Labels[k], v)
			}
		}
	}
}
