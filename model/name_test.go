package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNameRule: the one rule of a definition's meta.name and
// meta.namespace (CheckDefName, ValidateDefInto), with the names real
// clients send and the ones it refuses.
func TestNameRule(t *testing.T) {
	tests := []struct {
		name   string
		ok     bool
		reason string // part of the refusal
	}{
		{"proc-test-1", true, ""},                // gse-api.md's example
		{"nginx_1", true, ""},                    // {bk_process_name}_{local_inst_id}
		{"http-server-test1_1", true, ""},        // gsekit
		{"sub_870_host_1_host_exp002", true, ""}, // nodeman {group_id}_{plugin}
		{"bkmonitorbeat", true, ""},
		{"GSEKIT_BIZ_3", true, ""},
		{"gse.v2", true, ""},
		{"a", true, ""},
		{strings.Repeat("x", 128), true, ""},
		{"my app!", false, `character ' ' at byte 2`},
		{"a:b", false, `character ':'`},
		{"a/b", false, `character '/'`},
		{" a", false, `character ' ' at byte 0`},
		{"a\tb", false, `character '\t'`},
		{"a\nb", false, `character '\n'`},
		{"a\x1b[31m", false, `character '\x1b'`},
		{"", false, "required"},
		{strings.Repeat("x", 129), false, "longer than 128"},
		{".", false, "is not a name"},
		{"..", false, "is not a name"},
		{"a;b", false, `';'`},
		{"$(id)", false, `'$'`},
		{"a|b", false, `'|'`},
		{"a&b", false, `'&'`},
		{"a*", false, `'*'`},
		{"a'b", false, `'\''`},
		{"a=b", false, `'='`},
		{"a,b", false, `','`},
		{"a+b", false, `'+'`},
		{"nginx\u0430", false, `'а'`}, // Cyrillic а: looks like a Latin a
		{"进程", false, `'进'`},
	}
	for _, tt := range tests {
		v := &Validator{}
		v.CheckDefName("meta.name", tt.name, Identity{})
		if tt.ok {
			assert.NoError(t, v.Err(), "%q", tt.name)
			continue
		}
		if assert.Len(t, v.Errors(), 1, "%q", tt.name) {
			assert.Equal(t, "meta.name", v.Errors()[0].Field, "%q", tt.name)
			assert.Contains(t, v.Errors()[0].Reason, tt.reason, "%q", tt.name)
		}
		// The namespace follows the same rule.
		ns := &Validator{}
		ValidateNamespace(ns, "meta.namespace", tt.name)
		assert.Error(t, ns.Err(), "namespace %q", tt.name)
	}
}

// TestNameRuleJOBKey: a JOB form names a process by its value_key, which
// JOB fills in as setup_path/proc_name: that name is taken, and only that.
func TestNameRuleJOBKey(t *testing.T) {
	id := Identity{ProcName: "gseagent", SetupPath: "/usr/local/gse/"}
	for name, ok := range map[string]bool{
		"/usr/local/gse/gseagent": true,
		"/usr/local/gse/other":    false,
		"/usr/local/gse":          false,
		"a:b":                     false,
	} {
		v := &Validator{}
		v.CheckDefName("value_key", name, id)
		assert.Equal(t, ok, v.Err() == nil, name)
	}
	v := &Validator{}
	v.CheckDefName("value_key", `C:\gse\gseagent`, Identity{ProcName: "gseagent", SetupPath: `C:\gse`})
	assert.NoError(t, v.Err())
	// A setup_path the path rule takes is no name for that: the default
	// key is held to the rule between its separators.
	for setup, reason := range map[string]string{
		"/opt/a b":         `character ' ' at byte 6`,
		"/opt/x;$(id)":     `character ';' at byte 6`,
		"/opt/a:b":         `character ':' at byte 6`,
		"/opt/a\tb":        `character '\t'`,
		"/opt/gse\u0430":   `character 'а'`,
		`C:\Program Files`: `character ' ' at byte 10`,
	} {
		id := Identity{ProcName: "p", SetupPath: setup}
		v := &Validator{}
		v.CheckDefName("value_key", DefaultValueKey(setup, "p"), id)
		if assert.Len(t, v.Errors(), 1, setup) {
			assert.Equal(t, "value_key", v.Errors()[0].Field, setup)
			assert.Contains(t, v.Errors()[0].Reason, reason, setup)
		}
		v = &Validator{}
		v.checkHostPath("setup_path", setup, true, "bat") // the path rule takes it
		assert.NoError(t, v.Err(), setup)
	}
}

// TestNameRuleNotInAgents: an agent's Process.Validate (every op) keeps
// taking a name stored before the rule; only ValidateDefInto (a save)
// refuses it.
func TestNameRuleNotInAgents(t *testing.T) {
	p := validProcess()
	p.Meta.Name = "my app!"
	assert.NoError(t, p.Validate("process"))
	v := &Validator{}
	p.ValidateDefInto(v, "process", nil)
	assert.Equal(t, []string{"process.meta.name"}, v.Errors().Fields())
	p.Meta.Name = "nginx_1"
	v = &Validator{}
	p.ValidateDefInto(v, "process", nil)
	assert.NoError(t, v.Err())
}
