package sshconsole

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"gseproc/model"
)

// Key is one authorized public key: who it is and what it may touch.
type Key struct {
	Key         gossh.PublicKey
	Operator    string   // recorded in the audit trail for every action
	Namespaces  []string // what the operator may see and change; ["*"] = all
	ReadOnly    bool     // only status runs, the process editor is off
	Fingerprint string   // SHA256:..., for the logs
	Line        int      // line in the file
}

// operatorRe is the operator names' character set.
var operatorRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// ParseAuthorizedKeys reads an authorized-keys file: OpenSSH public keys,
// one a line, each with the options operator="NAME" and
// namespaces="NS,NS" (or "*"), and optionally read-only. Blank lines and
// # comments are skipped. Every bad line is reported (with its number and
// why), and a key listed twice is refused: a key is one operator.
func ParseAuthorizedKeys(data []byte) ([]Key, error) {
	var keys []Key
	var errs []error
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			continue
		}
		k.Line = n
		id := string(k.Key.Marshal())
		if first, ok := seen[id]; ok {
			errs = append(errs, fmt.Errorf("line %d: the key of line %d again (a key is one operator)", n, first))
			continue
		}
		seen[id] = n
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return keys, errors.Join(errs...)
}

func parseKeyLine(line string) (Key, error) {
	pub, _, opts, rest, err := gossh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return Key{}, fmt.Errorf("not an OpenSSH public key line: %w", err)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return Key{}, errors.New("more than one key on the line")
	}
	k := Key{Key: pub, Fingerprint: gossh.FingerprintSHA256(pub)}
	var haveNS bool
	for _, o := range opts {
		name, val, hasVal := strings.Cut(o, "=")
		if hasVal {
			if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
				return Key{}, fmt.Errorf("option %s: the value must be in double quotes", name)
			}
			val = val[1 : len(val)-1]
		}
		switch {
		case name == "operator" && hasVal:
			if !operatorRe.MatchString(val) {
				return Key{}, fmt.Errorf(`operator=%q: want 1-64 of letters, digits, ".", "_", "@", "-", starting with a letter or digit`, val)
			}
			k.Operator = val
		case name == "namespaces" && hasVal:
			haveNS = true
			for _, ns := range strings.Split(val, ",") {
				ns = strings.TrimSpace(ns)
				if ns != "*" {
					v := &model.Validator{}
					model.Meta{Namespace: ns}.ValidateInto(v, "", false)
					if err := v.Err(); err != nil {
						return Key{}, fmt.Errorf("namespaces: %q: %w", ns, err)
					}
				}
				k.Namespaces = append(k.Namespaces, ns)
			}
		case name == "read-only" && !hasVal:
			k.ReadOnly = true
		default:
			return Key{}, fmt.Errorf("option %q is not one of operator=\"NAME\", namespaces=\"NS,...\", read-only", o)
		}
	}
	if k.Operator == "" {
		return Key{}, errors.New(`operator="NAME" is required: every action is recorded under it`)
	}
	if !haveNS {
		return Key{}, errors.New(`namespaces="NS,..." is required ("*" for every namespace)`)
	}
	return k, nil
}

// LoadAuthorizedKeys reads and parses the file at path. Like sshd's
// StrictModes, a file others may write is refused: whoever can add a line
// can log in as any operator.
func LoadAuthorizedKeys(path string) ([]Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("authorized keys: %w", err)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("authorized keys %s: mode %v lets others write it: chmod go-w", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("authorized keys: %w", err)
	}
	keys, err := ParseAuthorizedKeys(data)
	if err != nil {
		return nil, fmt.Errorf("authorized keys %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("authorized keys %s: no key: nobody could log in", path)
	}
	return keys, nil
}
