package cli

import (
	"fmt"
	"io"
	"testing"
	"time"

	"gseproc/model"
)

// BenchmarkOpJSONLines: the op client's --json output of a status op over
// 10,000 hosts (what `gseproc bench fleet` reads): a line per result, with
// its content.
func BenchmarkOpJSONLines(b *testing.B) {
	start := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	rs := make([]model.Result, 10000)
	for i := range rs {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		rs[i] = model.Result{TaskID: "GSETASK:20261124050000:1", Seq: int64(i + 1), Host: model.Host{IP: ip}, ProcKey: "gse:beat",
			Op: model.OpStatus, State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "beat", SetupPath: "/usr/local/gse"},
			Status: &model.ProcStatus{ProcKey: "gse:beat", ProcName: "beat", State: model.ProcRunning, PID: 4000 + i, Hosted: true,
				StartTime: start, ReportTime: start.Unix(), CPU: 1.25, Mem: 0.5, MemRSS: 12 << 20, Version: "3.2.1", Threads: 7},
			Started: start, Finished: start.Add(5 * time.Millisecond)}
	}
	b.ReportAllocs()
	for b.Loop() {
		p := &resultPrinter{out: io.Discard, json: true, status: true}
		for _, r := range rs {
			if err := p.print(&r, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
}
