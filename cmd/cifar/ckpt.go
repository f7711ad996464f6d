package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/autograd/safetensors"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/infer"
)

// Files of a run folder.
const (
	metricsFile = "metrics.jsonl"
	curvesFile  = "curves.svg"
	summaryFile = "summary.json"
)

// modelMetadata returns the metadata that lets a reader (nn/infer,
// testdata/check_go_checkpoint.py) rebuild the network of c and prepare
// its inputs as the loaders did (they use the default normalisation).
func modelMetadata(c *config) map[string]string {
	m := infer.Spec{
		Model:      c.Model,
		Width:      c.Width,
		Shortcut:   c.Shortcut,
		NumClasses: cifar10.NumClasses,
		Mean:       cifar10.DefaultMean,
		Std:        cifar10.DefaultStd,
		Classes:    cifar10.ClassNames[:],
	}.Metadata()
	m["generator"] = "proxgen cmd/cifar"
	return m
}

// saveRun writes the run folder atomically file by file: first the
// training state (model, optimizer, run state and config in one file, the
// only file -resume reads), then the PyTorch-loadable model with the
// weights the network computes with, then metrics.jsonl and curves.svg
// regenerated from the history.
func saveRun(t *trainer) error {
	c := t.cfg
	if err := os.MkdirAll(c.Out, 0o755); err != nil {
		return fmt.Errorf("creating the run folder: %w", err)
	}
	cj, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encoding the configuration: %w", err)
	}
	if t.state.RNG, err = t.meth.rngState(); err != nil {
		return fmt.Errorf("saving the random state: %w", err)
	}
	sj, err := json.Marshal(&t.state)
	if err != nil {
		return fmt.Errorf("encoding the run state: %w", err)
	}
	meta := modelMetadata(c)
	meta["config"] = string(cj)
	meta["run"] = string(sj)
	ts := &checkpoint.TrainState{Model: t.model, Aux: t.meth.aux(), Optim: t.meth.opt.State(), Meta: meta}
	if err := checkpoint.SaveTrainState(filepath.Join(c.Out, checkpoint.TrainStateFileName), ts); err != nil {
		return err
	}

	mm := modelMetadata(c)
	mm["epoch"] = strconv.Itoa(t.state.Epoch)
	mm["optimizer"] = c.Optimizer
	mm["reg"] = c.Reg
	if n := len(t.state.History); n > 0 {
		mm["test_acc"] = strconv.FormatFloat(t.state.History[n-1].TestAcc, 'f', 4, 64)
	}
	t.meth.useEffective()
	err = checkpoint.SaveModel(filepath.Join(c.Out, checkpoint.ModelFileName), t.model, mm)
	t.meth.restore()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(c.Out, metricsFile), jsonl(t.state.History)); err != nil {
		return err
	}
	var svg strings.Builder
	title := fmt.Sprintf("%s %s %s", c.Model, c.Optimizer, c.Reg)
	if err := writeSVG(&svg, curves(t.state.History, title, c.binary()), 2); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(c.Out, curvesFile), []byte(svg.String()))
}

// writeFileAtomic writes data to path through a temporary file in the same
// folder that is synced and renamed into place.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
			err = fmt.Errorf("writing %s: %w", path, err)
		}
	}()
	if _, err = f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// storedRun is what a training-state file says about its run.
type storedRun struct {
	cfg   *config
	state runState
}

// readStoredRun reads the configuration and run state of the run folder
// dir without loading any tensor into a model.
func readStoredRun(dir string) (*storedRun, error) {
	path := filepath.Join(dir, checkpoint.TrainStateFileName)
	f, err := safetensors.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("-resume: %s holds no checkpoint (%s is missing)", dir, checkpoint.TrainStateFileName)
		}
		return nil, fmt.Errorf("-resume: %w", err)
	}
	if f.Metadata[checkpoint.FormatKey] != checkpoint.TrainStateFormat {
		return nil, fmt.Errorf("-resume: %s is not a training-state file", path)
	}
	s := &storedRun{cfg: defaultConfig()}
	if err := json.Unmarshal([]byte(f.Metadata["config"]), s.cfg); err != nil {
		return nil, fmt.Errorf("-resume: %s: bad config metadata: %v", path, err)
	}
	if err := json.Unmarshal([]byte(f.Metadata["run"]), &s.state); err != nil {
		return nil, fmt.Errorf("-resume: %s: bad run metadata: %v", path, err)
	}
	return s, nil
}

// mergeResume returns the stored configuration with the flags of this
// invocation applied: flags in mutableOnResume replace the stored value,
// any other flag given must equal it.
func mergeResume(stored, now *config) (*config, error) {
	merged := *stored
	merged.explicit = now.explicit
	merged.Out = now.Out
	merged.Progress, merged.JSON = now.Progress, now.JSON
	storedFlags := newFlagSet(stored, io.Discard)
	nowFlags := newFlagSet(now, io.Discard)
	mergedFlags := newFlagSet(&merged, io.Discard)
	var errs []string
	for name := range now.explicit {
		want := storedFlags.Lookup(name).Value.String()
		got := nowFlags.Lookup(name).Value.String()
		if isMutable(name) {
			// Settings of the environment rather than of the run (and
			// -epochs, to extend or shorten it) may change.
			if err := mergedFlags.Set(name, got); err != nil {
				return nil, fmt.Errorf("-%s: %v", name, err)
			}
			continue
		}
		if got != want {
			errs = append(errs, fmt.Sprintf("-%s %s (the run has %s)", name, got, want))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("-resume continues the run with its own settings; these flags differ: %s", strings.Join(errs, ", "))
	}
	merged.Resume = true
	return &merged, nil
}

func isMutable(name string) bool {
	for _, m := range mutableOnResume {
		if m == name {
			return true
		}
	}
	return false
}

// loadWeights loads the model tensors of the safetensors file at path into
// m: a model file (written by this program or by PyTorch, also with the
// "module." prefix of DataParallel) or a training-state file. It returns
// the file's metadata.
func loadWeights(path string, m nn.Module) (map[string]string, error) {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-weights: %w", err)
	}
	if err := checkpoint.LoadWeights(f, m); err != nil {
		return nil, fmt.Errorf("-weights %s: %w", path, err)
	}
	return f.Metadata, nil
}

// weightsModel returns the network settings stored in a weights file's
// metadata for the flags not given explicitly (used by -eval-only).
func weightsModel(c *config, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("-weights: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("-weights: %w", err)
	}
	file, err := safetensors.Read(f, st.Size())
	f.Close()
	if err != nil {
		return fmt.Errorf("-weights %s: %w", path, err)
	}
	meta := file.Metadata
	fs := newFlagSet(c, io.Discard)
	for _, k := range []string{"model", "width", "shortcut"} {
		if v, ok := meta[k]; ok && !c.explicit[k] {
			if err := fs.Set(k, v); err != nil {
				return fmt.Errorf("-weights %s: metadata %s=%q: %v", path, k, v, err)
			}
		}
	}
	return nil
}
