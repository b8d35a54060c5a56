package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCanonicalHost: every spelling of one host is the same host; what is
// not one host is refused with the part named, before anything long is
// parsed or echoed.
func TestCanonicalHost(t *testing.T) {
	same := []struct{ in, want string }{
		{"10.0.0.1", "10.0.0.1"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
		{"::FFFF:10.0.0.1", "10.0.0.1"},
		{"FE80::1", "fe80::1"},
		{"fe80:0:0:0:0:0:0:1", "fe80::1"},
		{"2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
	}
	for _, c := range same {
		h, err := Host{IP: c.in, CloudID: 3}.Canonical()
		require.NoError(t, err, c.in)
		assert.Equal(t, Host{IP: c.want, CloudID: 3}, h, c.in)
		id, err := Host{IP: c.in, CloudID: 3}.ID()
		require.NoError(t, err)
		assert.Equal(t, "3:"+c.want, id.String())
		back, err := ParseHostID(id.String())
		require.NoError(t, err)
		assert.Equal(t, id, back)
	}
	zone4200 := "fe80::1%" + strings.Repeat("z", 4200)
	bad := []struct {
		h      Host
		field  string
		reason string
	}{
		{Host{IP: "fe80::1%eth0"}, "hosts[0].ip", "zone"},
		{Host{IP: zone4200}, "hosts[0].ip", "at most 64"},
		{Host{IP: ""}, "hosts[0].ip", "required"},
		{Host{IP: " 10.0.0.1"}, "hosts[0].ip", "not an IP"},
		{Host{IP: "10.0.0.256"}, "hosts[0].ip", "not an IP"},
		{Host{IP: "10.0.0.1", CloudID: -1}, "hosts[0].bk_cloud_id", "out of range"},
		{Host{IP: "10.0.0.1", CloudID: MaxCloudID + 1}, "hosts[0].bk_cloud_id", "out of range"},
	}
	for _, c := range bad {
		v := &Validator{}
		got := CanonicalHosts(v, "hosts", []Host{c.h})
		require.Len(t, v.Errors(), 1, c.h.IP)
		assert.Equal(t, c.field, v.Errors()[0].Field)
		assert.Contains(t, v.Errors()[0].Reason, c.reason)
		assert.Less(t, len(v.Errors()[0].Reason), 200, "reason echoes the input")
		assert.Equal(t, Host{}, got[0])
		_, err := c.h.ID()
		assert.Error(t, err, "identity of %+v", c.h)
	}
	for _, s := range []string{"0:" + zone4200, "0:fe80::1%eth0", strings.Repeat("1", 200) + ":10.0.0.1", "0:::ffff:10.0.0.1x"} {
		_, err := ParseAgentID(s)
		assert.Error(t, err, s)
		assert.Less(t, len(err.Error()), 400)
	}
	h, err := ParseAgentID("0:::ffff:10.0.0.1")
	require.NoError(t, err)
	assert.Equal(t, Host{IP: "10.0.0.1"}, h)
	assert.False(t, HostID{}.Valid())
	longest, err := Host{IP: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", CloudID: MaxCloudID}.ID()
	require.NoError(t, err)
	assert.Len(t, longest.String(), MaxHostIDText)
}

// TestPathRule: paths are absolute, without '..' segments, and cleaned.
func TestPathRule(t *testing.T) {
	for _, p := range []string{"/usr/local/../../etc", "/a/..", "/../x", "/a/b/../c"} {
		v := &Validator{}
		v.CheckPath("setup_path", p, true)
		require.Len(t, v.Errors(), 1, p)
		assert.Contains(t, v.Errors()[0].Reason, "'..'", p)
	}
	for _, p := range []string{"/usr/local/xxx", "/a/..b/c", "/a/b../", "/data//x/./y/"} {
		v := &Validator{}
		v.CheckPath("setup_path", p, true)
		assert.NoError(t, v.Err(), p)
	}
	v := &Validator{}
	v.CheckPath("pid_path", "/"+strings.Repeat("a", MaxPath), true)
	assert.Equal(t, []string{"pid_path"}, v.Errors().Fields())
	assert.Equal(t, "/data/x/y", CleanPath("/data//x/./y/"))
	p := Process{Spec: Spec{Identity: Identity{SetupPath: "/opt/a/", PidPath: "/opt//a/a.pid", LogPath: "/var/log/./a"}}}
	c := p.Canonical().Spec.Identity
	assert.Equal(t, []string{"/opt/a", "/opt/a/a.pid", "", "/var/log/a"}, []string{c.SetupPath, c.PidPath, c.ConfigPath, c.LogPath})
}

// TestNoShellSplicing: a word is quoted for sh whole, and validation
// refuses a proc_name or namespace out of its character set (the v1 form's
// synthesised commands: wire.TestNoShellSplicing).
func TestNoShellSplicing(t *testing.T) {
	for in, want := range map[string]string{
		"gseagent": "gseagent", "bk_gse-1.2+x@y": "bk_gse-1.2+x@y", "": "''", "a b": "'a b'",
		"it's": `'it'\''s'`, "$(id)": "'$(id)'", "`id`": "'`id`'", "a\nb": "'a\nb'", "é": "'é'",
	} {
		assert.Equal(t, want, ShellQuote(in), in)
	}
	for _, bad := range []string{"x;y", "a b", "$x", "a/b", "..", ".", "a\"b", "%PATH%", "a|b", "é"} {
		v := &Validator{}
		v.CheckIdent("proc_name", bad, true, 256, procNameChar, ProcNameChars)
		assert.Len(t, v.Errors(), 1, bad)
	}
	for _, bad := range []string{"biz:1", "a b", "a+b", "ns/x"} {
		v := &Validator{}
		Meta{Namespace: bad, Name: "n"}.ValidateInto(v, "", true)
		assert.Equal(t, []string{"meta.namespace"}, v.Errors().Fields(), bad)
	}
	for _, good := range []string{"GSEKIT_BIZ_3", "bk-nodemgr", "nodeman", "biz_set_7", "gse.v2"} {
		v := &Validator{}
		Meta{Namespace: good, Name: "n"}.ValidateInto(v, "", true)
		assert.NoError(t, v.Err(), good)
	}
}
