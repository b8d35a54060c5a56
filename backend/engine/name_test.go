package engine_test

import (
	"context"
	"slices"
	"testing"

	"gseproc/backend"
	"gseproc/model"
)

// TestNameRuleAtSave: a definition whose name the name rule refuses
// (model.CheckDefName) is refused by SaveProcess and as an operate item,
// naming the field, storing and dispatching nothing; one stored before
// the rule stays operable and deletable, and only saving it again is
// refused.
func TestNameRuleAtSave(t *testing.T) {
	ctx := context.Background()
	f := newFake(2)
	e, _ := start(t, f, testCfg())
	hosts := []model.Host{f.hosts[0].Host}
	named := func(name string) model.Process { // proc_name stays valid: only the name is wrong
		p := proc("ns", "x", nil)
		p.Meta.Name = name
		return p
	}

	for _, name := range []string{"my app!", "a:b", "a/b", " a", "a\tb"} {
		err := e.SaveProcess(ctx, model.ProcessDef{Process: named(name), Hosts: hosts})
		if got := fieldsOf(err); !slices.Equal(got, []string{"process.meta.name"}) {
			t.Fatalf("save %q: fields %v (err %v)", name, got, err)
		}
		_, err = e.Operate(ctx, backend.OperateRequest{Op: model.OpStart,
			Items: []model.ProcessDef{{Process: named(name), Hosts: hosts}}})
		if got := fieldsOf(err); !slices.Equal(got, []string{"items[0].process.meta.name"}) {
			t.Fatalf("operate item %q: fields %v (err %v)", name, got, err)
		}
	}
	if defs, err := e.Processes(ctx, backend.ProcQuery{Namespace: "ns"}); err != nil || len(defs) != 2 {
		t.Fatalf("stored %d definitions (want the 2 seeded), err %v", len(defs), err)
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("%d dispatches for refused requests", n)
	}
	if err := e.SaveProcess(ctx, model.ProcessDef{Process: proc("ns", "nginx_1", nil), Hosts: hosts}); err != nil {
		t.Fatalf("a conforming name: %v", err)
	}

	// Stored before the rule (Seed does not validate: as a store written
	// by an older server).
	old := model.ProcessDef{Process: named("my app!"), Hosts: hosts}
	if err := e.Seed(ctx, []model.ProcessDef{old}); err != nil {
		t.Fatal(err)
	}
	_, res := operate(t, e, backend.OperateRequest{Op: model.OpStart, Selector: backend.Selector{Namespace: "ns", Name: "my app!"}})
	if len(res) != 1 || res[0].State != model.StateSuccess {
		t.Fatalf("a stored name the rule refuses is not operable: %+v", res)
	}
	if err := e.SaveProcess(ctx, old); !slices.Equal(fieldsOf(err), []string{"process.meta.name"}) {
		t.Fatalf("saving it again: %v", err)
	}
	if err := e.DeleteProcess(ctx, "ns:my app!"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if defs, _ := e.Processes(ctx, backend.ProcQuery{Namespace: "ns", Name: "my app!"}); len(defs) != 0 {
		t.Fatalf("not deleted: %d", len(defs))
	}
}
