package ui

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"gseproc/backend"
	"gseproc/model"
)

// The simulator's live controls as palette commands ("sim offline web
// 3%"): what a presenter makes happen during a demo. Each is refused by a
// backend whose fleet is real agents, with the reason in the error banner.

// simArgHelp is the argument grammar every sim command shares.
const simArgHelp = "[ns[:name]] [key=value] [@cloud:ip] [N | P%] [params]"

// simCommands are the palette commands of the simulator's controls.
func simCommands(s *shared) []Command {
	out := make([]Command, 0, len(model.SimActions))
	for _, a := range model.SimActions {
		help := model.SimActionHelp[a]
		switch a {
		case model.SimLatency:
			help += "; e.g. web 10% 800ms 3s"
		case model.SimFailures:
			help += "; e.g. batch rate=0.3"
		case model.SimFlap:
			help += "; e.g. @0:10.0.0.7 times=5 every=2s"
		case model.SimCrash:
			help += "; e.g. web:nginx 10 fails=20%"
		case model.SimOffline:
			help += "; e.g. web 3%"
		}
		out = append(out, Command{Name: "sim " + string(a), Help: help, Arg: simArgHelp, Changes: true,
			Run: func(arg string) tea.Cmd { return runSim(s.ctx, s.be, s.operator, a, arg) }})
	}
	return out
}

func runSim(ctx context.Context, be backend.Backend, operator string, a model.SimAction, arg string) tea.Cmd {
	what := "sim " + string(a)
	req, err := parseSimArg(a, arg)
	if err != nil {
		return func() tea.Msg { return Failure{What: what, Err: err} }
	}
	req.Source, req.Operator = "console", operator
	return func() tea.Msg {
		out, err := be.Simulate(ctx, req)
		if err != nil {
			return Failure{What: what, Err: err}
		}
		return Notice(out.Message)
	}
}

// parseSimArg reads a sim command's argument: words in any order, each
// one of (each given at most once; durations in whole milliseconds)
//
//	ns or ns:name   the processes whose hosts are selected
//	key=value       a process label (rate, p99, times, every, fails and
//	                note are the parameters instead)
//	@cloud:ip       one host (repeatable)
//	N or P%         how many of the selected hosts: a count or a share
//	250ms           latency: the median, then the p99
//
// Pure: the request it returns is checked by the backend again.
func parseSimArg(a model.SimAction, arg string) (backend.SimRequest, error) {
	req := backend.SimRequest{SimChange: model.SimChange{Action: a}}
	var lat []time.Duration
	given := map[string]string{} // what was given once: the count or share, each parameter and label
	once := func(what, w string) error {
		if prev, ok := given[what]; ok {
			return fmt.Errorf("%q: %s is given already (%q): give it once", w, what, prev)
		}
		given[what] = w
		return nil
	}
	for _, w := range strings.Fields(arg) {
		switch {
		case strings.HasPrefix(w, "@"):
			h, err := model.ParseAgentID(w[1:])
			if err != nil {
				return req, fmt.Errorf("%s: %w", w, err)
			}
			req.Selector.Hosts = append(req.Selector.Hosts, h)
		case strings.Contains(w, "="):
			k, v, _ := strings.Cut(w, "=")
			if err := once(k, w); err != nil {
				return req, err
			}
			if err := simParam(&req, k, v); err != nil {
				return req, err
			}
		case strings.HasSuffix(w, "%"):
			x, err := model.ParseShare(w)
			if err != nil {
				return req, err
			}
			if err := once("how many", w); err != nil {
				return req, err
			}
			req.Share = x
		default:
			if n, err := strconv.Atoi(w); err == nil {
				if err := once("how many", w); err != nil {
					return req, err
				}
				req.Count = n
				continue
			}
			if d, err := time.ParseDuration(w); err == nil {
				if _, err := wholeMS(d); err != nil {
					return req, fmt.Errorf("%s: %w", w, err)
				}
				lat = append(lat, d)
				continue
			}
			if req.Selector.Namespace != "" {
				return req, fmt.Errorf("%q: the namespace is already %q (one ns or ns:name)", w, req.Selector.Namespace)
			}
			ns, name, _ := strings.Cut(w, ":")
			req.Selector.Namespace, req.Selector.Name = ns, name
		}
	}
	switch len(lat) {
	case 0:
	case 1, 2:
		if a != model.SimLatency {
			return req, fmt.Errorf("a duration is a latency: only sim latency takes one")
		}
		if len(lat) == 2 && given["p99"] != "" {
			return req, fmt.Errorf("%q: the p99 is given already (%q): give it once", lat[1].String(), given["p99"])
		}
		req.LatencyMS = int(lat[0].Milliseconds())
		if len(lat) == 2 {
			req.LatencyP99MS = int(lat[1].Milliseconds())
		}
	default:
		return req, fmt.Errorf("latency takes a median and a p99, not %d durations", len(lat))
	}
	return req, req.Validate()
}

// simParam sets one key=value word: a parameter, or else a label.
func simParam(req *backend.SimRequest, k, v string) error {
	bad := func(err error) error { return fmt.Errorf("%s=%s: %w", k, v, err) }
	switch k {
	case "rate":
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return bad(err)
		}
		req.Rate = &x
	case "fails":
		x, err := model.ParseShare(v)
		if err != nil {
			return bad(err)
		}
		req.RestartFails = x
	case "times":
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad(err)
		}
		req.Times = n
	case "every", "p99":
		d, err := time.ParseDuration(v)
		if err != nil {
			return bad(err)
		}
		ms, err := wholeMS(d)
		if err != nil {
			return bad(err)
		}
		if k == "every" {
			req.EveryMS = ms
		} else {
			req.LatencyP99MS = ms
		}
	case "note":
		req.Note = v
	default:
		key, val, err := model.ParseLabel(k + "=" + v)
		if err != nil {
			return bad(err)
		}
		if req.Selector.Labels == nil {
			req.Selector.Labels = map[string]string{}
		}
		req.Selector.Labels[key] = val
	}
	return nil
}

// wholeMS is d in milliseconds, the unit the controls take; a duration
// that is not a whole number of them (250us, 1.5ms) is refused rather
// than cut (250us would be 0: no latency).
func wholeMS(d time.Duration) (int, error) {
	if d%time.Millisecond != 0 {
		return 0, fmt.Errorf("%v is not a whole number of milliseconds", d)
	}
	return int(d.Milliseconds()), nil
}
