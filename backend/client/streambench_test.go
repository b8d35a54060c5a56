package client

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"gseproc/model"
)

// BenchmarkTaskStream: the op client's read of a task stream of 10,000
// status results (an op over 10,000 hosts, as the server writes it):
// each event parsed and its result decoded (by one model.ResultDecoder,
// as Watch decodes them).
func BenchmarkTaskStream(b *testing.B) {
	start := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	var stream []byte
	for i := range 10000 {
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		r := model.Result{TaskID: "GSETASK:20261124050000:1", Seq: int64(i + 1), Host: model.Host{IP: ip}, ProcKey: "gse:beat",
			Op: model.OpStatus, State: model.StateSuccess, Message: "success", Proc: model.ResultProc{ProcName: "beat", SetupPath: "/usr/local/gse"},
			Status: &model.ProcStatus{ProcKey: "gse:beat", ProcName: "beat", State: model.ProcRunning, PID: 4000 + i, Hosted: true,
				StartTime: start, ReportTime: start.Unix(), CPU: 1.25, Mem: 0.5, MemRSS: 12 << 20, Version: "3.2.1", Threads: 7},
			Started: start, Finished: start.Add(5 * time.Millisecond)}
		stream = fmt.Appendf(stream, "id: %d\nevent: result\ndata: ", i+1)
		stream, _ = model.AppendResultJSON(stream, &r)
		stream = append(stream, "\n\n"...)
	}
	stream = append(stream, "event: end\ndata: {}\n\n"...)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		var rd model.ResultDecoder // as Watch decodes them
		_ = readEvents(bytes.NewReader(stream), func(ev sseEvent) bool {
			if ev.name == "result" {
				if _, err := rd.Decode(ev.data); err == nil {
					n++
				}
			}
			return true
		})
		if n != 10000 {
			b.Fatalf("%d results", n)
		}
	}
}
