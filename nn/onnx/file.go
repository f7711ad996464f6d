package onnx

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/proxgen/proxgen/nn"
	"github.com/proxgen/proxgen/nn/checkpoint"
	"github.com/proxgen/proxgen/nn/checkpoint/safetensors"
	"github.com/proxgen/proxgen/nn/infer"
	"github.com/proxgen/proxgen/nn/models"
)

// Metadata keys that ExportFile adds to the ONNX model besides those of
// the model file (for image classifiers, the nn/models.Spec keys: model,
// width, shortcut, num_classes, mean, std, classes and widths, with their
// defaults filled in).
const (
	KeyInput  = "input"  // how to prepare the input, in words
	KeyOutput = "output" // what the outputs are, in words
	KeyVocab  = "vocab"  // language model: vocabulary size
	KeyEmb    = "emb"    // language model: embedding size
	KeyHidden = "hidden" // language model: LSTM units per layer
	KeyLayers = "layers" // language model: LSTM layers
	KeyWords  = "words"  // language model: JSON array of the words by id (FileOptions.Words)
)

// FileOptions controls ExportFile.
type FileOptions struct {
	Options
	// Spec describes an image classifier's network where the file's
	// metadata does not (files written by PyTorch), as for nn/infer.Load.
	Spec models.Spec
	// Words, when not nil, names the words of a language model by id
	// (the vocabulary of its training file, see datasets/ptb.BuildVocab);
	// it is stored under KeyWords and must have one word per id.
	Words []string
}

// ExportFile reads the model file src and writes the ONNX model of its
// network to dst. src is an image classifier's model file or training
// checkpoint, read as nn/infer.Load reads it (opt.Spec merged with the
// file's metadata), or a language model's file of cmd/ptb, recognised by
// its "encoder.weight" and "rnn.*" tensors, whose sizes give the network.
// The ONNX metadata are the file's (none for a training checkpoint), the
// network's description and opt.Metadata, which wins. It returns a
// one-line description of the exported network.
func ExportFile(dst, src string, opt FileOptions) (string, error) {
	f, err := safetensors.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("onnx: %w", err)
	}
	// A compressed model file (sparse or binary tensors) is read dense.
	if f, err = checkpoint.Expand(f); err != nil {
		return "", fmt.Errorf("onnx: %s: %w", src, err)
	}
	meta := map[string]string{}
	if _, checkpointFile := f.Metadata[checkpoint.FormatKey]; !checkpointFile {
		// A training checkpoint's metadata describes the run, not the
		// model.
		maps.Copy(meta, f.Metadata)
	}
	var net nn.Module
	var desc string
	if lm, ok, err := languageModel(f); err != nil {
		return "", fmt.Errorf("onnx: %s: %w", src, err)
	} else if ok {
		net = lm
		desc, err = describeLM(lm, opt.Words, meta)
		if err != nil {
			return "", fmt.Errorf("onnx: %s: %w", src, err)
		}
	} else {
		var spec models.Spec
		if net, spec, err = infer.Network(f, opt.Spec); err != nil {
			return "", fmt.Errorf("onnx: %s: %w", src, err)
		}
		maps.Copy(meta, spec.Metadata())
		meta[KeyInput] = fmt.Sprintf("%s float32 (batch, 3, 32, 32): the R, G and B planes of a 32×32 image, each value (pixel/255 − mean[c]) / std[c]", InputName)
		meta[KeyOutput] = fmt.Sprintf("%s float32 (batch, %d): logits of the classes named by %q; softmax gives probabilities", LogitsName, spec.NumClasses, models.KeyClasses)
		desc = fmt.Sprintf("%s width %g", spec.Model, spec.Width)
		if strings.HasPrefix(spec.Model, "resnet") {
			desc += " shortcut " + spec.Shortcut
		}
		if spec.Widths != nil {
			desc += " (compacted widths)"
		}
		desc += fmt.Sprintf(", %d classes", spec.NumClasses)
	}
	maps.Copy(meta, opt.Metadata)
	o := opt.Options
	o.Metadata = meta
	if err := WriteFile(dst, net, o); err != nil {
		return "", err
	}
	return desc, nil
}

// languageModel returns the language model whose tensors f holds (under
// checkpoint.ModelPrefix in a training checkpoint), with its weights, and
// whether f holds one.
func languageModel(f *safetensors.File) (*models.LanguageModel, bool, error) {
	prefix := ""
	if _, ok := f.Tensors[checkpoint.ModelPrefix+"encoder.weight"]; ok {
		prefix = checkpoint.ModelPrefix
	}
	enc, ok := f.Tensors[prefix+"encoder.weight"]
	hh, ok2 := f.Tensors[prefix+"rnn.weight_hh_l0"]
	if !ok || !ok2 {
		return nil, false, nil
	}
	layers := 0
	for {
		if _, ok := f.Tensors[prefix+"rnn.weight_ih_l"+strconv.Itoa(layers)]; !ok {
			break
		}
		layers++
	}
	if len(enc.Shape) != 2 || len(hh.Shape) != 2 || layers == 0 || enc.Shape[0] < 1 || enc.Shape[1] < 1 || hh.Shape[1] < 1 {
		return nil, true, fmt.Errorf("encoder.weight %v and rnn.weight_hh_l0 %v are not a language model's", enc.Shape, hh.Shape)
	}
	// Dropout does not matter in evaluation mode; the weights are replaced.
	lm := models.NewLanguageModel(enc.Shape[0], enc.Shape[1], hh.Shape[1], layers, 0, rand.New(rand.NewPCG(0, 0)))
	if err := checkpoint.LoadWeights(f, lm); err != nil {
		return nil, true, err
	}
	lm.SetTraining(false)
	return lm, true, nil
}

// describeLM adds the language model's sizes (and words) to meta and
// returns its description.
func describeLM(lm *models.LanguageModel, words []string, meta map[string]string) (string, error) {
	vocab, emb := lm.Encoder.Weight.Dim(0), lm.Encoder.Weight.Dim(1)
	hidden, layers := lm.RNN.HiddenSize, lm.RNN.NumLayers
	if words != nil {
		if len(words) != vocab {
			return "", fmt.Errorf("%d words for a vocabulary of %d", len(words), vocab)
		}
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // "<unk>", "<eos>" as they are
		if err := enc.Encode(words); err != nil {
			return "", err
		}
		meta[KeyWords] = strings.TrimSuffix(b.String(), "\n")
	}
	meta[models.KeyModel] = "lstm_lm"
	for k, v := range map[string]int{KeyVocab: vocab, KeyEmb: emb, KeyHidden: hidden, KeyLayers: layers} {
		meta[k] = strconv.Itoa(v)
	}
	meta[KeyInput] = fmt.Sprintf("%s int64 (seq, batch) word ids; %s and %s float32 (%d, batch, %d) initial LSTM states (zeros to start)", IDsName, H0Name, C0Name, layers, hidden)
	meta[KeyOutput] = fmt.Sprintf("%s float32 (seq·batch, %d): next-word logits, row t·batch+b for ids[t][b]; %s and %s the final states", LogitsName, vocab, HNName, CNName)
	return fmt.Sprintf("LSTM language model: vocabulary %d, embedding %d, %d layer(s) of %d units", vocab, emb, layers, hidden), nil
}
