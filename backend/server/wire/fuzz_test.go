package wire

import (
	"strings"
	"testing"

	"gseproc/model"
)

// Fuzz targets of the wire forms. Their seeds run as ordinary tests.

// FuzzParseHostRef: an agent_id_list entry with a ':' is what
// model.ParseAgentID makes of it; any other accepted entry is an agent id.
func FuzzParseHostRef(f *testing.F) {
	for _, s := range []string{"0:10.0.0.1", "2:FE80::1", "0200000002abcdef0123", "020000000242010A00002F17521298676503", "zz", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseHostRef(s)
		if err != nil {
			return
		}
		if r.AgentID == "" {
			h, herr := model.ParseAgentID(s)
			if herr != nil || r.Host != h {
				t.Fatalf("ParseHostRef(%q) = %v, ParseAgentID = %v, %v", s, r, h, herr)
			}
			return
		}
		if id, err := model.CheckAgentID(r.AgentID); err != nil || id != r.AgentID || strings.Contains(s, ":") {
			t.Fatalf("ParseHostRef(%q) = agent id %q (%v)", s, r.AgentID, err)
		}
	})
}

// FuzzProcessInfo: the v1 form's synthesised commands carry a proc_name
// that validation accepts as one plain word.
func FuzzProcessInfo(f *testing.F) {
	for _, s := range []string{"gseagent", "x;touch pwned;true", "nginx", "a b", "bk_gse-1.0"} {
		f.Add(s, "sh")
		f.Add(s, "bat")
	}
	f.Fuzz(func(t *testing.T, name, ext string) {
		pi := ProcessInfo{SetupPath: "/opt/a", ProcName: name, PidPath: "/opt/a/a.pid", CmdShellExt: ext, IPList: []Host{{IP: "10.0.0.1"}}}
		v := &model.Validator{}
		ValidateInfos(v, FormOperateProc, Scope{Type: ScopeBiz, ID: "1"}, []ProcessInfo{pi}, 0)
		if v.Err() != nil {
			return
		}
		p := pi.ToProcess(FormOperateProc, Scope{Type: ScopeBiz, ID: "1"})
		for _, c := range []string{p.Spec.Control.StartCmd, p.Spec.Control.StopCmd} {
			if !strings.Contains(c, " "+name) || strings.ContainsAny(name, ";&|$`'\"<> \n%!^") {
				t.Fatalf("proc_name %q accepted into %q", name, c)
			}
		}
	})
}
