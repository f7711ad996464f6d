package cifarrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/cmd/internal/experiment"
	"github.com/proxgen/proxgen/datasets/cifar10"
	"github.com/proxgen/proxgen/internal/cli"
	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/models"
	"github.com/proxgen/proxgen/nn/train"
)

// Files of a run folder.
const (
	MetricsFile = "metrics.jsonl"
	CurvesFile  = "curves.svg"
	SummaryFile = "summary.json"
)

// modelMetadata returns the metadata that lets a reader (nn/infer,
// testdata/check_go_checkpoint.py) rebuild the network of c and prepare
// its inputs as the loaders did (they use the default normalisation).
func modelMetadata(c *config) map[string]string {
	s := c.spec()
	s.Mean, s.Std, s.Classes = cifar10.DefaultMean(), cifar10.DefaultStd(), cifar10.ClassNames()
	m := s.Metadata()
	m["generator"] = "proxgen cmd/cifar"
	if c.Precision != "fp32" {
		m["train_precision"] = c.Precision
	}
	if c.WeightsSHA256 != "" {
		// A warm start: the file the run started from.
		m["init"] = c.Weights
		m["init_sha256"] = c.WeightsSHA256
	}
	return m
}

// recalibratedEpochs returns the epochs of h whose batch-norm statistics
// were re-estimated, comma-separated ("" for none), for the model file's
// metadata key "bn_recalibrated_epochs".
func recalibratedEpochs(h []EpochRecord) string {
	var e []string
	for _, r := range h {
		if r.Recalibrated > 0 {
			e = append(e, strconv.Itoa(r.Epoch))
		}
	}
	return strings.Join(e, ",")
}

// outputs returns the files the run folder derives from the checkpoint:
// the PyTorch-loadable model with the weights the network computes with,
// the curves and, at the end, the summary. (metrics.jsonl is the train
// package's.)
func (t *trainer) outputs() []train.Output {
	c := t.cfg
	return []train.Output{
		{Name: checkpoint.ModelFileName, Data: func(info *train.Info) ([]byte, error) {
			mm := modelMetadata(c)
			mm["epoch"] = strconv.Itoa(info.Epoch)
			mm["optimizer"] = c.Optimizer
			mm["reg"] = c.Reg
			if h, err := decodeHistory(info.History); err != nil {
				return nil, err
			} else if n := len(h); n > 0 {
				mm["test_acc"] = strconv.FormatFloat(h[n-1].TestAcc, 'f', 4, 64)
				if e := recalibratedEpochs(h); e != "" {
					mm["bn_recalibrated_epochs"] = e
				}
			}
			t.meth.UseEffective()
			defer t.meth.Restore()
			return train.ModelFile(t.model, mm)
		}},
		{Name: BestFile, Data: func(info *train.Info) ([]byte, error) {
			if t.bestEpoch == 0 {
				return nil, nil
			}
			mm := modelMetadata(c)
			mm["epoch"] = strconv.Itoa(t.bestEpoch)
			mm["best_of"] = strconv.Itoa(info.Epoch)
			mm["optimizer"] = c.Optimizer
			mm["reg"] = c.Reg
			mm["test_acc"] = strconv.FormatFloat(t.bestAcc, 'f', 4, 64)
			return t.best.File(t.model, mm)
		}},
		{Name: CurvesFile, Data: func(info *train.Info) ([]byte, error) {
			h, err := decodeHistory(info.History)
			if err != nil {
				return nil, err
			}
			var svg bytes.Buffer
			title := fmt.Sprintf("%s %s %s", c.Model, c.Optimizer, c.Reg)
			err = train.WriteSVG(&svg, curves(h, title, c.binary()), 2)
			return svg.Bytes(), err
		}},
		{Name: SummaryFile, Final: true, Data: func(info *train.Info) ([]byte, error) {
			h, err := decodeHistory(info.History)
			if err != nil {
				return nil, err
			}
			b, err := train.MarshalJSON(t.makeSummary(h))
			if err != nil {
				return nil, err
			}
			var out bytes.Buffer
			json.Indent(&out, b, "", "  ")
			out.WriteByte('\n')
			return out.Bytes(), nil
		}},
	}
}

// decodeHistory decodes the metrics records of a run.
func decodeHistory(lines []json.RawMessage) ([]EpochRecord, error) {
	return experiment.DecodeHistory[EpochRecord](lines)
}

// readStoredRun reads the checkpoint of the run folder dir and the
// configuration stored in it, without loading any tensor into a model.
func readStoredRun(dir string) (*train.Checkpoint, *config, error) {
	c := defaultConfig()
	c.Recalibrate = 0 // the runs stored before -recalibrate existed
	c.GMPEnd = 0      // omitted when 0 (no -gmp)
	ck, err := experiment.ReadStoredRun(dir, c)
	if err != nil {
		return nil, nil, fmt.Errorf("-resume: %w", err)
	}
	return ck, c, nil
}

// mergeResume returns the stored configuration with the flags of this
// invocation applied: flags in mutableOnResume replace the stored value,
// any other flag given must equal it.
func mergeResume(stored, now *config) (*config, error) {
	merged := *stored
	merged.explicit = now.explicit
	merged.Out = now.Out
	merged.Progress, merged.JSON = now.Progress, now.JSON
	err := experiment.MergeFlags(newFlagSet(stored, io.Discard), newFlagSet(now, io.Discard), newFlagSet(&merged, io.Discard), now.explicit, mutableOnResume)
	if err != nil {
		return nil, err
	}
	merged.Resume = true
	if merged.Epochs != stored.Epochs {
		if err := rederive(stored, &merged); err != nil {
			return nil, err
		}
	}
	return &merged, nil
}

// rederive resets to "auto" the settings of merged that the original run
// derived from its -epochs, so that resolve chooses them for the new
// length as a fresh run would. A checkpoint that does not record which
// settings were derived is refused when a setting has the value its
// -epochs implies and the new -epochs implies another.
func rederive(stored, merged *config) error {
	merged.Derived = slices.Clone(stored.Derived)
	for _, d := range epochDependent {
		switch {
		case slices.Contains(stored.Derived, d.key):
			resetAuto(merged, d.key)
		case stored.Derived == nil:
			then, now := autoValue(stored, stored.Epochs, d.key), autoValue(stored, merged.Epochs, d.key)
			if then == settingValue(stored, d.key) && then != now {
				return fmt.Errorf("-epochs %d: the run's -%s %s is what -epochs %d implies, and its checkpoint (written before derived settings were recorded) does not say whether it was chosen or derived; a fresh %d-epoch run would use -%s %s. Start a new run, or resume with -epochs %d",
					merged.Epochs, d.flag, then, stored.Epochs, merged.Epochs, d.flag, now, stored.Epochs)
			}
		}
	}
	return nil
}

// resetAuto sets the setting key of c back to its "auto" value.
func resetAuto(c *config, key string) {
	switch key {
	case "schedule":
		c.Schedule = "auto"
	case "hard_quant_epoch":
		c.HardQuantEpoch = -2
	case "gmp_end":
		c.GMPEnd = -2
	}
}

// settingValue returns the setting key of c as text.
func settingValue(c *config, key string) string {
	switch key {
	case "schedule":
		return c.Schedule
	case "hard_quant_epoch":
		return strconv.Itoa(c.HardQuantEpoch)
	case "gmp_end":
		return strconv.Itoa(c.GMPEnd)
	}
	return ""
}

// autoValue returns the value resolve derives for the setting key of c
// with the given number of epochs ("" when c does not resolve).
func autoValue(c *config, epochs int, key string) string {
	d := *c
	d.Epochs = epochs
	d.Derived = nil
	resetAuto(&d, key)
	if d.resolve() != nil {
		return ""
	}
	return settingValue(&d, key)
}

// resumeChanges describes what -resume changed in the run: -epochs and
// the settings derived from it (empty when nothing changed).
func resumeChanges(stored, merged *config) string {
	if stored.Epochs == merged.Epochs {
		return ""
	}
	parts := []string{fmt.Sprintf("-epochs %d (was %d)", merged.Epochs, stored.Epochs)}
	for _, d := range epochDependent {
		if was, now := settingValue(stored, d.key), settingValue(merged, d.key); was != now {
			parts = append(parts, fmt.Sprintf("-%s %s (was %s)", d.flag, now, was))
		}
	}
	return strings.Join(parts, ", ")
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
// metadata for the flags not given explicitly (used by -eval-only and
// -compact).
func weightsModel(c *config, path string) error {
	file, err := safetensors.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-weights: %w", err)
	}
	if err := applyWeightsMeta(c, path, file.Metadata); err != nil {
		return err
	}
	// The network must be one the file's tensors can fill: metadata or
	// flags must not make a small file build a huge network.
	s, err := c.spec().Complete()
	if err == nil {
		err = s.Validate(file)
	}
	if err != nil {
		return fmt.Errorf("-weights %s: %w", path, err)
	}
	return nil
}

// compactedWeights prepares a new training run from a compacted -weights
// file (written by -compact, with the per-layer widths in its metadata):
// the run takes the network (the flags -width and -shortcut not given,
// -model and the widths) from the file's metadata, and its default -out
// names that model; an explicit -model is a usage error. Any other
// weights file leaves c as it is.
func compactedWeights(c *config) error {
	file, err := safetensors.ReadFile(c.Weights)
	if err != nil {
		return fmt.Errorf("-weights: %w", err)
	}
	if _, ok := file.Metadata[models.KeyWidths]; !ok {
		return nil
	}
	if c.explicit["model"] {
		return cli.Usagef("-weights %s holds a compacted network (per-layer widths in its metadata), which -model %s does not build; leave out -model to train it", c.Weights, c.Model)
	}
	if err := applyWeightsMeta(c, c.Weights, file.Metadata); err != nil {
		return err
	}
	if !c.explicit["out"] {
		c.Out = ""
	}
	return c.resolve()
}

// applyWeightsMeta sets the network settings of c not given explicitly
// from the metadata meta of the weights file path.
func applyWeightsMeta(c *config, path string, meta map[string]string) error {
	fs := newFlagSet(c, io.Discard)
	for _, k := range []string{"model", "width", "shortcut"} {
		if v, ok := meta[k]; ok && !c.explicit[k] {
			if err := fs.Set(k, v); err != nil {
				return fmt.Errorf("-weights %s: metadata %s=%q: %w", path, k, v, err)
			}
		}
	}
	// A compacted network (-compact) has its per-layer widths there.
	if _, ok := meta[models.KeyWidths]; ok && !c.explicit["model"] {
		s, err := models.SpecFromMetadata(meta)
		if err != nil {
			return fmt.Errorf("-weights %s: %w", path, err)
		}
		c.Widths = s.Widths
	}
	return nil
}
