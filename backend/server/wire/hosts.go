package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gseproc/model"
)

// Hosts is a list of hosts as the native API takes them (a selector's
// hosts, backend.Selector.Hosts): each entry either the compact text
// "cloud:ip" ("0:10.0.0.1", "2:fd00::1": model.Host.AgentID's form) or
// the object {"ip": "10.0.0.1", "bk_cloud_id": 0} the GSE forms send;
// one list may mix them. The compact form takes ~16 bytes a host where
// the object takes ~38: a console's select-all of 100,000 hosts is a
// 1.6 MB request, not 3.8 MB against the server's max_body_bytes (4 MB
// by default). Hosts marshals to the compact form.
//
// A text entry is parsed by ParseHostText at the entrance (the server
// checks every entry before decoding, and refuses a wrong one naming it:
// selector.hosts[3]); the hosts of either form are then canonicalized
// like any other (model.CanonicalHosts).
type Hosts []model.Host

// ParseHostText parses the compact form "cloud:ip": the cloud id in
// decimal digits (no sign, no leading zero), a colon, then the IP address
// (parsed as model.ParseIP does, canonicalized). Blanks are refused
// anywhere.
func ParseHostText(s string) (model.Host, error) {
	if len(s) > model.MaxAgentIDText {
		return model.Host{}, fmt.Errorf("%d characters, more than %d", len(s), model.MaxAgentIDText)
	}
	c, ip, ok := strings.Cut(s, ":")
	if !ok {
		return model.Host{}, fmt.Errorf("%q: want cloud:ip, e.g. 0:10.0.0.1", s)
	}
	cloud, err := strconv.Atoi(c)
	if err != nil || cloud < 0 || cloud > model.MaxCloudID || strconv.Itoa(cloud) != c {
		return model.Host{}, fmt.Errorf("%q: the cloud id %q is not a number in [0,%d] in decimal digits", s, c, model.MaxCloudID)
	}
	a, err := model.ParseIP(ip)
	if err != nil {
		return model.Host{}, fmt.Errorf("%q: ip %w", s, err)
	}
	// The ip as written when it is already the canonical text (a
	// listing's hosts are): no new string of it.
	var buf [64]byte
	if string(a.AppendTo(buf[:0])) == ip {
		return model.Host{IP: ip, CloudID: cloud}, nil
	}
	return model.Host{IP: a.String(), CloudID: cloud}, nil
}

// MarshalJSON writes the compact form: ["0:10.0.0.1", ...].
func (hs Hosts) MarshalJSON() ([]byte, error) {
	if hs == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(hs)*20)
	b = append(b, '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHostText(b, h)
	}
	return append(b, ']'), nil
}

// plainText reports whether s needs no escaping in a JSON string (nor
// in HTML, as encoding/json escapes it).
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// UnmarshalJSON reads a list whose entries are compact texts or objects.
// A text ParseHostText refuses is an error naming its index (the server
// has refused it, naming its field, before decoding).
func (hs *Hosts) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*hs = nil
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Hosts, len(raw))
	for i, r := range raw {
		r = bytes.TrimSpace(r)
		if len(r) > 0 && r[0] == '"' {
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return fmt.Errorf("hosts[%d]: %w", i, err)
			}
			h, err := ParseHostText(s)
			if err != nil {
				return fmt.Errorf("hosts[%d]: %w", i, err)
			}
			out[i] = h
			continue
		}
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return fmt.Errorf("hosts[%d]: %w", i, err)
		}
	}
	*hs = out
	return nil
}
