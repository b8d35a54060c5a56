package model

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// FieldError names one offending field and why.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e FieldError) Error() string { return e.Field + ": " + e.Reason }

// ValidationError holds every error found in one request, not just the first.
type ValidationError []FieldError

func (e ValidationError) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Error()
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

// Fields lists the offending field paths.
func (e ValidationError) Fields() []string {
	out := make([]string, len(e))
	for i, f := range e {
		out[i] = f.Field
	}
	return out
}

// Validator collects field errors.
type Validator struct{ errs ValidationError }

// Add records one error.
func (v *Validator) Add(field, reason string) {
	v.errs = append(v.errs, FieldError{Field: field, Reason: reason})
}

// Addf records one error with a formatted reason.
func (v *Validator) Addf(field, format string, args ...any) {
	v.Add(field, fmt.Sprintf(format, args...))
}

// Err is nil when nothing was recorded, else a ValidationError.
func (v *Validator) Err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return v.errs
}

// Errors returns what was recorded.
func (v *Validator) Errors() ValidationError { return v.errs }

// Merge adds the errors of err when it is a ValidationError (else one error under field).
func (v *Validator) Merge(field string, err error) {
	if err == nil {
		return
	}
	if ve, ok := err.(ValidationError); ok {
		v.errs = append(v.errs, ve...)
		return
	}
	v.Add(field, err.Error())
}

// CheckName validates a name-like string: no NUL, newline or control characters.
func (v *Validator) CheckName(field, s string, required bool, max int) {
	if s == "" {
		if required {
			v.Add(field, "required")
		}
		return
	}
	if strings.TrimSpace(s) == "" {
		v.Add(field, "must not be blank")
		return
	}
	if len(s) > max {
		v.Addf(field, "longer than %d characters", max)
	}
	if bad := badChar(s); bad != "" {
		v.Add(field, "must not contain "+bad)
	}
}

// CheckLabel validates one label, a process's or a host's (the one label
// rule): its key 1-128 characters without '=' or ',' (a selector's
// separators), its value at most 256; neither blank-only nor with a NUL,
// newline or control character (a label is shown on operators'
// terminals: an escape sequence in it would drive them).
func (v *Validator) CheckLabel(field, key, val string) {
	v.CheckName(field, key, true, 128)
	if strings.ContainsAny(key, "=,") {
		v.Add(field, "label key must not contain '=' or ','")
	}
	v.CheckName(field, val, false, 256)
}

// MaxLabels is how many labels a definition or a host may carry, the
// label rule's count: a label set is copied into every host listing,
// selector match and stored definition, and a host's comes from its
// agent, which is untrusted.
const MaxLabels = 64

// CheckLabelCount refuses n labels when they are more than MaxLabels.
func (v *Validator) CheckLabelCount(field string, n int) {
	if n > MaxLabels {
		v.Addf(field, "%d labels, more than %d", n, MaxLabels)
	}
}

// MaxPath is the longest path a definition may carry.
const MaxPath = 4096

// CheckPath validates a path of a definition (setup_path, pid_path,
// cfg_path, log_path): absolute, at most MaxPath bytes, without NUL,
// newline or control characters, and without a ".." segment: a path that
// climbs out of where it claims to be is refused, never resolved. This is
// the one path rule (checkPath; a bat or ps1 process may also give Windows
// drive paths, see winpath.go); CleanPath is its companion.
func (v *Validator) CheckPath(field, p string, required bool) { v.checkPath(field, p, required, false) }

// checkPath is CheckPath; with windows, a drive path (C:\dir, C:/dir) is
// absolute too, its segments split at either slash, and Windows' reserved
// characters (< > " | ? * and a colon after the drive) are refused.
func (v *Validator) checkPath(field, p string, required, windows bool) {
	if p == "" {
		if required {
			v.Add(field, "required")
		}
		return
	}
	if len(p) > MaxPath {
		v.Addf(field, "longer than %d characters", MaxPath)
		return
	}
	if bad := badChar(p); bad != "" {
		v.Add(field, "must not contain "+bad)
		return
	}
	sep := func(r rune) bool { return r == '/' }
	switch {
	case windows && IsWindowsPath(p):
		if i := strings.IndexAny(p[2:], `<>"|?*:`); i >= 0 {
			v.Addf(field, "%q: %q is not allowed in a Windows path", p, p[2+i])
			return
		}
		sep = func(r rune) bool { return r == '/' || r == '\\' }
	case !path.IsAbs(p):
		if windows {
			v.Addf(field, "%q is not an absolute path (C:\\dir or /dir)", p)
		} else {
			v.Addf(field, "%q is not an absolute path", p)
		}
		return
	}
	for seg := range strings.FieldsFuncSeq(p, sep) {
		if seg == ".." {
			v.Addf(field, "%q climbs out with a '..' segment: give the path without it", p)
			return
		}
	}
}

// CleanPath is p in its clean form (path.Clean: no repeated or trailing
// slashes, no "." segments), for a path that passed CheckPath; "" stays "".
func CleanPath(p string) string {
	if p == "" {
		return ""
	}
	return path.Clean(p)
}

// CheckCommand validates a shell command: any text but NUL.
func (v *Validator) CheckCommand(field, c string) {
	if strings.ContainsRune(c, 0) {
		v.Add(field, "must not contain a NUL byte")
	}
	if len(c) > 16384 {
		v.Add(field, "longer than 16384 characters")
	}
}

// CheckRange validates lo <= x <= hi.
func (v *Validator) CheckRange(field string, x, lo, hi float64) {
	if x < lo || x > hi {
		v.Addf(field, "%v is out of range [%v,%v]", x, lo, hi)
	}
}

// Identifier character sets. A proc_name is a binary's file name and is
// what the v1 operate_proc form puts into the commands it synthesises; a
// namespace is one token of keys "namespace:name". Both are refused when
// they hold anything else, whatever the shell would make of it.
const (
	ProcNameChars  = "letters A-Z a-z, digits and . _ - + @"
	NamespaceChars = "letters A-Z a-z, digits and . _ -"
)

func procNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-' || c == '+' || c == '@'
}

func namespaceChar(c byte) bool { return procNameChar(c) && c != '+' && c != '@' }

// The name rule: a definition's meta.name and meta.namespace are both
// 1-MaxName characters of NameChars (NamespaceChars is the same set), not
// "." or "..". Both are tokens of keys joined with ':' (namespace:name,
// agent_id:namespace:name, cloud:ip:namespace:name), of file and subject
// names, and are shown on operators' terminals and typed into shells: so
// no ':', '/', white space, shell metacharacters or control characters.
// Letters are ASCII only: every name real clients send is (proc-test-1,
// nginx_1, sub_870_host_1_host_exp002, GSEKIT_BIZ_3), and a letter of
// another script can look like an ASCII one (Cyrillic 'а' and Latin 'a')
// while naming another process, which an operator confirming an op
// cannot see.
const (
	MaxName   = 128
	NameChars = NamespaceChars
)

// CheckDefName validates the meta.name of a definition being saved or
// sent (the entrances: the engine's canonicalDef, the API forms, the
// console's form, apply) by the name rule. It is not part of
// Process.Validate, which agents run on every op: a definition stored
// before the rule, its name now refused, stays operable and deletable;
// only saving it (again) is refused. A name equal to the definition's
// default JOB index key, setup_path/proc_name (DefaultValueKey), is also
// taken, the JOB forms naming a process so when value_key is left out (as
// JOB itself does), its setup_path part held to the rule between the
// path's separators (and past a Windows drive's colon): the path rule (CheckPath) lets white
// space, shell metacharacters, ':' and letters of other scripts through,
// and "/opt/a b;$(id)/p" is a valid setup_path/proc_name but no name.
func (v *Validator) CheckDefName(field, name string, id Identity) {
	if name == "" || id.ProcName == "" || id.SetupPath == "" ||
		name != DefaultValueKey(id.SetupPath, id.ProcName) && name != DefaultValueKey(CleanPath(id.SetupPath), id.ProcName) {
		v.CheckIdent(field, name, true, MaxName, namespaceChar, NameChars)
		return
	}
	i, dir := 0, name[:len(name)-len(id.ProcName)] // proc_name: its own rule
	if IsWindowsPath(dir) {
		i = 2 // past "C:"
	}
	for ; i < len(dir); i++ {
		if c := dir[i]; !namespaceChar(c) && c != '/' && c != '\\' {
			r, _ := utf8.DecodeRuneInString(dir[i:])
			v.Addf(field, "%s (setup_path/proc_name): character %q at byte %d is not allowed (only %s and the path's separators)", clip(name), r, i, NameChars)
			return
		}
	}
}

// DefaultValueKey is the agent index key when value_key is empty:
// setup_path + "/" + proc_name, or with "\\" for a Windows path written
// with backslashes (as JOB builds it).
func DefaultValueKey(setupPath, procName string) string {
	if IsWindowsPath(setupPath) && strings.Contains(setupPath, `\`) {
		return strings.TrimRight(setupPath, `\/`) + `\` + procName
	}
	return strings.TrimRight(setupPath, "/") + "/" + procName
}

// CheckIdent validates an identifier against its character set (ok, and
// chars to name it): required when required, at most max bytes, not "." or
// "..". It reports the first offending character.
func (v *Validator) CheckIdent(field, s string, required bool, max int, ok func(byte) bool, chars string) {
	if s == "" {
		if required {
			v.Add(field, "required")
		}
		return
	}
	if len(s) > max {
		v.Addf(field, "longer than %d characters", max)
		return
	}
	if s == "." || s == ".." {
		v.Addf(field, "%q is not a name", s)
		return
	}
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			r, _ := utf8.DecodeRuneInString(s[i:]) // the character, not its first byte
			v.Addf(field, "%s: character %q at byte %d is not allowed (only %s)", clip(s), r, i, chars)
			return
		}
	}
}

// ShellQuote quotes s as one word for a POSIX shell: unchanged when it is
// made only of characters no shell treats specially, else in single
// quotes (a single quote inside closes, escapes and reopens them). Every
// value spliced into a command gseproc synthesises goes through it.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return r > 0x7f || !procNameChar(byte(r)) && r != '/' && r != ':' && r != ',' && r != '='
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CmdQuote quotes s as one argument for cmd.exe and PowerShell: unchanged
// when made of ProcNameChars, else in double quotes. cmd.exe expands % and
// ! even inside quotes, so this is only a second line: the values it is
// given passed CheckIdent with the proc_name set.
func CmdQuote(s string) string {
	for i := 0; i < len(s); i++ {
		if !procNameChar(s[i]) {
			return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
		}
	}
	return s
}

// badChar names the first character of s a name, label or path must not
// hold: NUL, a newline, a control character (C0 but tab, DEL, and the C1
// range, whose CSI some terminals obey as ESC [ does) or a byte that is not
// UTF-8 (stored, a JSON round trip would turn it into U+FFFD: another
// name). What PlainText would drop from a terminal is refused here.
func badChar(s string) string {
	for i, r := range s {
		switch {
		case r == 0:
			return "a NUL byte"
		case r == '\n' || r == '\r':
			return "a newline"
		case r < 0x20 && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f:
			return "a control character"
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return "a byte that is not UTF-8"
			}
		}
	}
	return ""
}
