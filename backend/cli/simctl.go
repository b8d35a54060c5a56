package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"gseproc/backend"
	"gseproc/model"
)

// runSimControl is `gseproc sim ACTION [flags]`: one live control of a
// simulated fleet (a server's with --server, else a fresh embedded one,
// which shows what the control picks). A server whose fleet is real
// agents refuses it.
func runSimControl(ctx context.Context, action model.SimAction, args []string, io Stdio) error {
	fs := newFlags("sim "+string(action), "sim "+string(action)+" [--server URL] [--ns NS] [--name NAME] [--label k=v] [--host cloud:ip] [--share 3% | --count N] [flags]", io)
	var cf commonFlags
	cf.register(fs)
	var tf targetFlags
	tf.register(fs, true)
	share := fs.String("share", "", "act on this share of the selected hosts: `3%` or 0.03 (default: all of them)")
	count := fs.Int("count", 0, "act on `N` of the selected hosts")
	latency := fs.Duration("latency", 0, "latency: the median answer time (e.g. 250ms)")
	p99 := fs.Duration("p99", 0, "latency: the 99th percentile (default: the median)")
	rate := fs.Float64("rate", -1, "failures: the rate commands fail at, in [0,1]")
	restartFails := fs.Float64("restart-fails", 0, "crash: the share of relaunches that fail, in [0,1]")
	times := fs.Int("times", 0, fmt.Sprintf("flap: how many times the agent goes offline and back (default %d)", model.DefaultFlapTimes))
	every := fs.Duration("every", 0, fmt.Sprintf("flap: how long each half lasts (default %s)", time.Duration(model.DefaultFlapEvery)*time.Millisecond))
	note := fs.String("note", "", "words carried into the event, for the audience")
	asJSON := fs.Bool("json", false, "print the outcome as JSON")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: gseproc sim %s [flags]\n\n%s.\n\n", action, model.SimActionHelp[action])
		fmt.Fprintf(w, "Hosts: those carrying the processes --ns, --name and --label select (every host\nwhen none is given), limited to --host; --share or --count of them, picked by\nthe fleet's seed (the same seed picks the same hosts). Refused by a server whose\nfleet is real agents.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError("sim "+string(action), "unexpected argument %q", pos[0])
	}
	labels, hosts, err := tf.parse("sim " + string(action))
	if err != nil {
		return err
	}
	req := backend.SimRequest{
		SimChange: model.SimChange{Action: action, Count: *count, RestartFails: *restartFails, Times: *times,
			LatencyMS: int(latency.Milliseconds()), LatencyP99MS: int(p99.Milliseconds()), EveryMS: int(every.Milliseconds()), Note: *note},
		Selector: backend.Selector{Namespace: tf.ns, Name: tf.name, Labels: labels, Hosts: hosts},
		Source:   "cli",
	}
	if *share != "" {
		x, err := model.ParseShare(*share)
		if err != nil {
			return usageError("sim "+string(action), "--share: %v", err)
		}
		req.Share = x
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["rate"] {
		req.Rate = rate
	}
	if err := req.Validate(); err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	be, closer, err := cf.open(ctx, io)
	if err != nil {
		return err
	}
	defer closer()
	out, err := be.Simulate(ctx, req)
	if err != nil {
		if errors.Is(err, model.ErrNotSimulated) {
			return &ExitError{Code: 1, Err: err}
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(io.Out)
		return enc.Encode(out)
	}
	fmt.Fprintln(io.Out, out.Message)
	var names []string
	for _, t := range out.Picked {
		s := t.Host.String()
		if t.ProcKey != "" {
			s += " " + t.ProcKey
		}
		names = append(names, s)
	}
	if len(names) > 0 {
		const show = 20
		more := ""
		if len(names) > show {
			more = fmt.Sprintf(" ... and %d more", len(names)-show)
			names = names[:show]
		}
		fmt.Fprintf(io.Out, "picked: %s%s\n", strings.Join(names, ", "), more)
	}
	return nil
}
