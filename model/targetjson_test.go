package model

import (
	"bytes"
	"encoding/json"
	"testing"
)

func checkTargetsJSON(t *testing.T, ts []Target) {
	t.Helper()
	want, err := json.Marshal(ts)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendTargetsJSON([]byte("prefix"), ts); !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendTargetsJSON differs from json.Marshal:\n got %s\nwant prefix%s", got, want)
	}
}

// Targets are written as json.Marshal writes them: none (nil or empty),
// with and without an agent id, strings to escape.
func TestTargetsJSON(t *testing.T) {
	checkTargetsJSON(t, nil)
	checkTargetsJSON(t, []Target{})
	checkTargetsJSON(t, []Target{{}})
	checkTargetsJSON(t, []Target{{Host: Host{IP: "10.0.0.1", CloudID: 2}, ProcKey: "gse:agent"},
		{Host: Host{IP: "::1", CloudID: -1}, ProcKey: "web:<nginx>&\"x\"", AgentID: "0:10.0.0.1\u2028\xff"}})
}

// FuzzTargetsJSON: AppendTargetsJSON writes what json.Marshal writes.
func FuzzTargetsJSON(f *testing.F) {
	f.Add("10.0.0.1", 0, "gse:agent", "", uint8(2))
	f.Add("<&>\u2029", -7, "\x00\"\\", "\xff", uint8(1))
	f.Add("10.0.0.2", 1, "ns:p", "1:10.0.0.2<\u2028", uint8(3)) // agent ids on the second and third
	f.Fuzz(func(t *testing.T, ip string, cloud int, proc, agent string, n uint8) {
		ts := make([]Target, n%4)
		for i := range ts {
			ts[i] = Target{Host: Host{IP: ip, CloudID: cloud + i}, ProcKey: proc, AgentID: agent[:len(agent)*i/3]} // none for the first, more for each next
		}
		checkTargetsJSON(t, ts)
	})
}
