package ui

import "context"

// PaceMemory is node.PaceMemory, which `gseproc` runs for the embedded
// console (backend/cli runConsole): set by pacehook_test.go, in package
// ui_test, since node imports ui. The embedded benchmarks pace their
// process with it, as the console's is.
var PaceMemory func(ctx context.Context) (stop func())
