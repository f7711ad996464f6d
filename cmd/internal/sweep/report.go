package sweep

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/proxgen/proxgen/internal/atomicfile"
	"github.com/proxgen/proxgen/nn/train"
)

// WriteStatus prints one line per run: index, state, epoch, the last
// metrics and the ETA, then a count per state.
func WriteStatus(w io.Writer, prog Program, st []Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "run\tstate\tepoch\tlast metrics\teta\tpoint")
	count := map[string]int{}
	for _, s := range st {
		count[s.State]++
		state := s.State
		if s.State == "failed" {
			state = fmt.Sprintf("failed (exit %d)", s.Exit)
		}
		epoch := fmt.Sprintf("%d/%d", s.Epoch, s.Epochs)
		if s.Step > 0 {
			epoch += fmt.Sprintf(" +%d steps", s.Step)
		}
		var last []string
		for _, k := range append([]string{prog.Y}, prog.X, "loss", "train_loss") {
			if v, ok := s.Last[k].(float64); ok {
				last = append(last, k+" "+formatValue(v))
			}
		}
		eta := "-"
		if s.ETA > 0 {
			eta = s.ETA.String()
		}
		point := s.Label
		if point == "" || !strings.HasPrefix(s.Dir, "runs"+string(filepath.Separator)) {
			point = s.Dir // a named run
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", s.Index, state, epoch, strings.Join(last, ", "), eta, point)
	}
	var parts []string
	for _, k := range []string{"done", "partial", "failed", "pending"} {
		if count[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[k], k))
		}
	}
	fmt.Fprintf(tw, "%d runs: %s\n", len(st), strings.Join(parts, ", "))
	return tw.Flush()
}

func formatValue(v float64) string {
	return strconv.FormatFloat(v, 'g', 5, 64)
}

// Table is the result of Collect: one row per finished run.
type Table struct {
	// Header holds "run", the flags that vary between the runs, and the
	// program's columns.
	Header []string
	Rows   [][]string
	// X and Y are the chart's values per row (NaN when missing), Series
	// the row's curve: the varying flags other than lambda and seed.
	X, Y   []float64
	Series []string
}

// Collect tabulates the finished runs of the sweep folder dir: the flags
// that vary between runs and the program's columns, read from the run's
// summary.json and, for keys it lacks, its last metrics record.
func Collect(dir string, m *Manifest) (*Table, Program, error) {
	prog, err := LookupProgram(m.Program)
	if err != nil {
		return nil, prog, err
	}
	varying := varyingFlags(m.Runs)
	t := &Table{Header: append(append([]string{"run"}, varying...), prog.Columns...)}
	for _, r := range m.Runs {
		rd := filepath.Join(dir, r.Dir)
		b, err := os.ReadFile(filepath.Join(rd, SummaryFile))
		if err != nil {
			continue // not finished
		}
		vals := map[string]any{}
		if recs := readRecords(filepath.Join(rd, train.MetricsName)); len(recs) > 0 {
			vals = recs[len(recs)-1]
		}
		var sum map[string]any
		if err := json.Unmarshal(b, &sum); err != nil {
			return nil, prog, fmt.Errorf("%s: %w", filepath.Join(rd, SummaryFile), err)
		}
		for k, v := range sum {
			vals[k] = v
		}
		row := []string{strconv.Itoa(r.Index)}
		var series []string
		for _, f := range varying {
			row = append(row, r.Flags[f])
			if f != "lambda" && f != "seed" {
				series = append(series, f+"="+r.Flags[f])
			}
		}
		for _, c := range prog.Columns {
			row = append(row, cell(vals[c]))
		}
		t.Rows = append(t.Rows, row)
		t.X = append(t.X, number(vals[prog.X]))
		t.Y = append(t.Y, number(vals[prog.Y]))
		t.Series = append(t.Series, strings.Join(series, " "))
	}
	return t, prog, nil
}

// varyingFlags returns the flags whose values differ between runs, sorted.
func varyingFlags(runs []Run) []string {
	vals := map[string]map[string]bool{}
	for _, r := range runs {
		for k := range r.Flags {
			if vals[k] == nil {
				vals[k] = map[string]bool{}
			}
		}
	}
	for k := range vals {
		for _, r := range runs {
			v, ok := r.Flags[k]
			if !ok {
				v = "\x00unset"
			}
			vals[k][v] = true
		}
	}
	var out []string
	for k, v := range vals {
		if len(v) > 1 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case float64:
		return formatValue(x)
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func number(v any) float64 {
	if x, ok := v.(float64); ok {
		return x
	}
	return math.NaN()
}

// WriteCSV writes the table as CSV.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(t.Header)
	cw.WriteAll(t.Rows)
	return cw.Error()
}

// WriteMarkdown writes the table as a Markdown table.
func (t *Table) WriteMarkdown(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("| " + strings.Join(t.Header, " | ") + " |\n|")
	for range t.Header {
		b.WriteString(" --- |")
	}
	b.WriteByte('\n')
	for _, r := range t.Rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	_, err := w.Write(b.Bytes())
	return err
}

// WriteSVG draws Y against X (for cifar, test accuracy against the
// fraction of zero weights), one curve per series, points in order of X.
func (t *Table) WriteSVG(w io.Writer, prog Program) error {
	byName := map[string]*train.Series{}
	var order []string
	for i := range t.Rows {
		name := t.Series[i]
		if name == "" {
			name = "runs"
		}
		s := byName[name]
		if s == nil {
			s = &train.Series{Name: name}
			byName[name] = s
			order = append(order, name)
		}
		s.X, s.Y = append(s.X, t.X[i]), append(s.Y, t.Y[i])
	}
	var series []train.Series
	for _, name := range order {
		s := byName[name]
		idx := make([]int, len(s.X))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return s.X[idx[a]] < s.X[idx[b]] })
		x, y := make([]float64, len(idx)), make([]float64, len(idx))
		for i, j := range idx {
			x[i], y[i] = s.X[j], s.Y[j]
		}
		series = append(series, train.Series{Name: name, X: x, Y: y})
	}
	return train.WriteSVG(w, []train.Chart{{
		Title: fmt.Sprintf("%s sweep: %s against %s", prog.Name, prog.Y, prog.X), XLabel: prog.X, YLabel: prog.Y, Series: series,
	}}, 1)
}

// WriteFiles writes the table to collect.csv, collect.md and collect.svg
// in the sweep folder dir.
func (t *Table) WriteFiles(dir string, prog Program) error {
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"collect.csv", t.WriteCSV},
		{"collect.md", t.WriteMarkdown},
		{"collect.svg", func(w io.Writer) error { return t.WriteSVG(w, prog) }},
	} {
		var b bytes.Buffer
		if err := f.write(&b); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(dir, f.name), b.Bytes(), atomicfile.Options{}); err != nil {
			return err
		}
	}
	return nil
}
