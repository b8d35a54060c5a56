package transport

import "time"

// processCPU is not measured on Windows (no getrusage): 0.
func processCPU() time.Duration { return 0 }
