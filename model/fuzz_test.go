package model

import (
	"strings"
	"testing"
)

// Fuzz targets of model's parsers (host identities, labels, shell
// quoting). Their seeds run as ordinary tests.

// FuzzParseAgentID: whatever is accepted is canonical (parsing its own
// spelling gives it back), bounded, and has an identity.
func FuzzParseAgentID(f *testing.F) {
	for _, s := range []string{"0:10.0.0.1", "1:10.0.0.1", "0:::ffff:10.0.0.1", "2:FE80::1", "0:fe80::1%eth0",
		"0:" + strings.Repeat("z", 100), "x:1.2.3.4", "0:2001:db8::1", " 3:10.0.0.9 ", "0200000002abcdef0123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseAgentID(s)
		if len(s) > MaxAgentIDText && err == nil {
			t.Fatalf("accepted %d bytes", len(s))
		}
		if err != nil {
			return
		}
		again, err := ParseAgentID(h.AgentID())
		if err != nil || again != h {
			t.Fatalf("%q -> %v -> %v, %v: not canonical", s, h, again, err)
		}
		id, err := h.ID()
		if err != nil {
			t.Fatalf("%v has no identity: %v", h, err)
		}
		if id.String() != h.AgentID() || len(id.String()) > MaxHostIDText || strings.ContainsAny(h.IP, "%ABCDEF ") {
			t.Fatalf("%q: identity %q", s, id)
		}
	})
}

// FuzzParseLabel: a label parses into a non-empty key without blanks
// around, or is refused.
func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{"app=nginx", "bk_biz_id=1", "=x", "a", "a=b=c", " k = v ", "proc_name=proc-test"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, v, err := ParseLabel(s)
		if err != nil {
			return
		}
		if k == "" || strings.TrimSpace(k) != k || strings.TrimSpace(v) != v || !strings.Contains(s, "=") {
			t.Fatalf("%q -> %q=%q", s, k, v)
		}
	})
}

// FuzzShellQuote: the quoted word reads back as the value (POSIX
// single-quote rules) and leaves nothing unquoted a shell acts on.
func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"gseagent", "x;touch pwned;true", "it's", "", "$(id)", "a\nb", "'", "''\\'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := ShellQuote(s)
		if q == s {
			for i := 0; i < len(s); i++ {
				c := s[i]
				if !procNameChar(c) && c != '/' && c != ':' && c != ',' && c != '=' {
					t.Fatalf("%q left unquoted", s)
				}
			}
			return
		}
		// Read it back: outside quotes only \' may appear between quoted runs.
		var out strings.Builder
		for i := 0; i < len(q); {
			switch {
			case q[i] == '\'':
				j := strings.IndexByte(q[i+1:], '\'')
				if j < 0 {
					t.Fatalf("%q -> %q: unterminated quote", s, q)
				}
				out.WriteString(q[i+1 : i+1+j])
				i += j + 2
			case strings.HasPrefix(q[i:], `\'`):
				out.WriteByte('\'')
				i += 2
			default:
				t.Fatalf("%q -> %q: unquoted %q", s, q, q[i])
			}
		}
		if out.String() != s {
			t.Fatalf("%q -> %q reads back as %q", s, q, out.String())
		}
	})
}
