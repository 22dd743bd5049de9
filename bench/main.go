// Command bench compares retrykit with other Go retry libraries on two
// scenarios, an operation that succeeds at once and one that succeeds after
// two immediate retries, and prints three side-by-side tables: one for the
// retry loops around a plain function, one for the HTTP integrations
// (retrykit's httpretry and its peers) around a GET to a loopback server,
// and one for the gRPC client interceptors (grpcretry and
// go-grpc-middleware's retry) around a unary call to a loopback server.
//
// Usage:
//
//	go run . [-count N] [-benchtime D]
//
// Each scenario of each library runs count times through testing.Benchmark,
// the libraries taking turns so that a noisy moment hits them all alike; the
// tables show the medians and each library's time as a multiple of
// retrykit's (first table), of the bare http.Transport's (HTTP success), of
// httpretry's (HTTP two retries), of a ClientConn without interceptor
// (gRPC success) or of grpcretry's (gRPC two retries).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
)

func main() {
	testing.Init()
	count := flag.Int("count", 5, "runs of each benchmark; the table shows the median")
	benchtime := flag.String("benchtime", "300ms", "time (or Nx iterations) per benchmark run, as go test -benchtime")
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, "usage: go run . [-count N] [-benchtime D]\n")
		flag.VisitAll(func(f *flag.Flag) {
			if !strings.HasPrefix(f.Name, "test.") { // testing.Init's flags
				fmt.Fprintf(out, "  -%s\t%s (default %s)\n", f.Name, f.Usage, f.DefValue)
			}
		})
	}
	flag.Parse()
	if *count < 1 || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := flag.Set("test.benchtime", *benchtime); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -benchtime %s: %v\n", *benchtime, err)
		os.Exit(2)
	}

	libs, hlibs, glibs := Libs(), HTTPLibs(), GRPCLibs()
	// Each row is one library's two scenarios, the core libraries' rows
	// first, then the HTTP libraries', then the gRPC libraries'.
	type row struct {
		name string
		s    [2]Scenario
	}
	var rows []row
	for _, l := range libs {
		rows = append(rows, row{l.Name, [2]Scenario{l.Success, l.TwoRetries}})
	}
	for _, l := range hlibs {
		rows = append(rows, row{l.Name, [2]Scenario{l.Success, l.TwoRetries}})
	}
	for _, l := range glibs {
		rows = append(rows, row{l.Name, [2]Scenario{l.Success, l.TwoRetries}})
	}
	res := make([][2][]testing.BenchmarkResult, len(rows))
	for round := range *count {
		fmt.Fprintf(os.Stderr, "round %d/%d\n", round+1, *count)
		for i, r := range rows {
			for k, s := range r.s {
				if s == nil {
					continue
				}
				br := testing.Benchmark(func(b *testing.B) { benchScenario(b, s) })
				if br.N == 0 {
					fmt.Fprintf(os.Stderr, "bench: %s, %s: %v\n", r.name, scenarioNames[k], benchFailure)
					os.Exit(1)
				}
				res[i][k] = append(res[i][k], br)
			}
		}
	}

	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.name
	}
	n, h := len(libs), len(libs)+len(hlibs)
	fmt.Printf("%s %s/%s, %d CPUs, GOMAXPROCS %d; median of %d run(s) of %s each\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), *count, *benchtime)
	fmt.Println("Retry loop alone (the operation is a function call):")
	fmt.Println()
	printTable(os.Stdout, names[:n], res[:n], [2]string{"retrykit", "retrykit"})
	fmt.Println()
	fmt.Println("HTTP: one GET to a loopback server, body read and closed:")
	fmt.Println()
	printTable(os.Stdout, names[n:h], res[n:h], [2]string{"bare", "httpretry"})
	fmt.Println()
	fmt.Println("gRPC: one unary call to a loopback server, grpc's own retry off:")
	fmt.Println()
	printTable(os.Stdout, names[h:], res[h:], [2]string{"bare", "grpcretry"})
}

var scenarioNames = [2]string{"success", "two retries"}

// benchFailure is the error that stopped the last failed benchScenario:
// testing.Benchmark does not show it.
var benchFailure error

// benchScenario runs s b.N times; the benchmarks and main share it.
func benchScenario(b *testing.B, s Scenario) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s(ctx); err != nil {
			benchFailure = err
			b.Fatal(err)
		}
	}
}

// stats are the medians of one scenario's runs.
type stats struct {
	ns, allocs, bytes float64
	ok                bool
}

func summarize(rs []testing.BenchmarkResult) stats {
	if len(rs) == 0 {
		return stats{}
	}
	var ns, allocs, bytes []float64
	for _, r := range rs {
		n := float64(r.N)
		ns = append(ns, float64(r.T.Nanoseconds())/n)
		allocs = append(allocs, float64(r.MemAllocs)/n)
		bytes = append(bytes, float64(r.MemBytes)/n)
	}
	return stats{median(ns), median(allocs), median(bytes), true}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// printTable writes one row per library, names[i] with the results
// res[i]: each scenario's medians and its time as a multiple of that of the
// row named base[k], under a header naming the scenarios.
func printTable(out io.Writer, names []string, res [][2][]testing.BenchmarkResult, base [2]string) {
	var ref [2]stats // the base rows
	for i, name := range names {
		for k := range 2 {
			if name == base[k] {
				ref[k] = summarize(res[i][k])
			}
		}
	}

	// The columns are aligned by tabwriter; the scenario names are then
	// centred over their columns, which a "|" column separates.
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "library\tns/op\tallocs/op\tB/op\tvs %s\t|\tns/op\tallocs/op\tB/op\tvs %s\t\n", base[0], base[1])
	for i, name := range names {
		fmt.Fprintf(w, "%s\t", name)
		for k := range 2 {
			if k == 1 {
				fmt.Fprint(w, "|\t")
			}
			st := summarize(res[i][k])
			if !st.ok {
				fmt.Fprint(w, "-\t-\t-\t-\t")
				continue
			}
			ratio := "-"
			if ref[k].ok && ref[k].ns > 0 {
				ratio = fmt.Sprintf("%.2fx", st.ns/ref[k].ns)
			}
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%s\t", formatNs(st.ns), formatCount(st.allocs), st.bytes, ratio)
		}
		fmt.Fprintln(w)
	}
	w.Flush()

	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	sep := strings.Index(lines[0], "|")
	name := len(lines[0]) - len(strings.TrimLeft(lines[0], " ")) + len("library")
	for i, line := range lines {
		// Library names are left-aligned, numbers right-aligned.
		lib := strings.TrimSpace(line[:name])
		lines[i] = lib + strings.Repeat(" ", name-len(lib)) + line[name:]
	}
	fmt.Fprintln(out, strings.Repeat(" ", name)+center("success", sep-name)+"|"+center("two retries", len(lines[0])-sep-1))
	for _, line := range lines {
		fmt.Fprintln(out, line)
	}
}

// center centres s in a field of n columns, framed by dashes.
func center(s string, n int) string {
	s = " " + s + " "
	if len(s)+2 > n {
		return s
	}
	left := (n - len(s)) / 2
	return "  " + strings.Repeat("-", left-2) + s + strings.Repeat("-", n-len(s)-left)
}

// formatNs shows short times with a decimal, long ones without.
func formatNs(ns float64) string {
	if ns < 100 {
		return fmt.Sprintf("%.1f", ns)
	}
	return fmt.Sprintf("%.0f", ns)
}

// formatCount shows a count that is whole to two decimals as an integer,
// and other counts, which pooled allocations can give, with two decimals.
func formatCount(x float64) string {
	if r := math.Round(x); math.Abs(x-r) < 0.005 {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.2f", x)
}
