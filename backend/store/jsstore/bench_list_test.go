package jsstore

import (
	"context"
	"testing"

	"gseproc/model"
)

// BenchmarkProcessesSmall lists a registry of 10 definitions: the read
// each Operate, Hosts and Info call makes, dominated by round trips.
func BenchmarkProcessesSmall(b *testing.B) {
	s := open(b, startNATS(b, natsCfg(b, b.TempDir())), Options{Memory: true})
	ctx := context.Background()
	for i := range 10 {
		p := model.Process{Meta: model.Meta{Namespace: "ns", Name: string(rune('a' + i))}}
		if err := s.PutProcess(ctx, model.ProcessDef{Process: p, Hosts: []model.Host{{IP: "10.0.0.1"}}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		defs, err := s.Processes(ctx)
		if err != nil || len(defs) != 10 {
			b.Fatalf("%d definitions, %v", len(defs), err)
		}
	}
}
