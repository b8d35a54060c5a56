package ui

import (
	"strings"
	"testing"

	"gseproc/model"
)

// TestFormPolicyEmptyIsDefaultZeroIsZero: in the console's form an empty
// policy field is a field left out (its documented default) and a 0 typed
// is 0; a definition whose start check is 0 shows "0" and saves 0 again
// (it used to show empty and come back as 5). A new definition keeps the
// defaults of what the form does not show (start_retries,
// start_interval).
func TestFormPolicyEmptyIsDefaultZeroIsZero(t *testing.T) {
	base := newDef("web")
	v := valsFrom(base)
	if v.CheckBegin != "5" || v.OpTimeout != "60" || v.InstanceNum != "1" {
		t.Fatalf("new form shows %q %q %q", v.CheckBegin, v.OpTimeout, v.InstanceNum)
	}
	v.Name, v.ProcName, v.SetupPath, v.PidPath, v.Hosts, v.StartCmd = "z", "z", "/opt/z", "/opt/z/z.pid", "0:10.0.0.1", "./start.sh"
	v.CheckBegin, v.OpTimeout, v.InstanceNum = "", "", ""
	d, errs := validateDef(v, base)
	if len(errs) != 0 {
		t.Fatalf("errors %v", errs)
	}
	want := model.DefaultPolicy()
	want.AutoType = model.AutoResident
	if d.Process.Spec.Policy != want {
		t.Fatalf("empty fields: policy %+v, want %+v", d.Process.Spec.Policy, want)
	}

	v.CheckBegin = "0"
	d, errs = validateDef(v, base)
	if len(errs) != 0 || d.Process.Spec.Policy.StartCheckSecs != 0 {
		t.Fatalf("start check 0: %+v %v", d.Process.Spec.Policy, errs)
	}
	again := valsFrom(d)
	if again.CheckBegin != "0" {
		t.Fatalf("a stored start check 0 shows %q", again.CheckBegin)
	}
	if d2, _ := again.toDef(d); d2.Process.Spec.Policy.StartCheckSecs != 0 {
		t.Fatalf("saved again as %d", d2.Process.Spec.Policy.StartCheckSecs)
	}

	v.OpTimeout = "0"
	if _, errs = validateDef(v, base); fieldErr(errs, "process.spec.monitor_policy.op_timeout") == nil {
		t.Fatalf("op_timeout 0 accepted: %v", errs)
	}
}

// TestFormNameRule: the console's form refuses a name the name rule
// refuses (model.CheckDefName) on the Name field, with the engine's
// message, and its hint says the rule.
func TestFormNameRule(t *testing.T) {
	base := newDef("web")
	v := valsFrom(base)
	v.ProcName, v.SetupPath, v.PidPath, v.Hosts, v.StartCmd = "z", "/opt/z", "/opt/z/z.pid", "0:10.0.0.1", "./start.sh"
	for _, name := range []string{"my app!", "a:b", "a/b", "a b", "a\tb", "a;b"} {
		v.Name = name
		_, errs := validateDef(v, base)
		err := fieldErr(errs, "process.meta.name")
		if err == nil || !strings.Contains(err.Error(), "is not allowed (only letters A-Z a-z, digits and . _ -)") {
			t.Errorf("name %q: %v (all: %v)", name, err, errs)
		}
	}
	v.Name = "proc-test-1"
	if _, errs := validateDef(v, base); len(errs) != 0 {
		t.Fatalf("proc-test-1: %v", errs)
	}
	v.Name = " a " // the form trims what is typed around a field
	if d, errs := validateDef(v, base); len(errs) != 0 || d.Process.Meta.Name != "a" {
		t.Fatalf("%q saved as %q: %v", v.Name, d.Process.Meta.Name, errs)
	}
	v.Namespace = "a:b"
	if _, errs := validateDef(v, base); fieldErr(errs, "process.meta.namespace") == nil {
		t.Fatalf("namespace a:b accepted")
	}
}
