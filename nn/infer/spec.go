package infer

import "github.com/proxgen/proxgen/nn/models"

// Spec describes the network of a model file and how its inputs are
// prepared; it is models.Spec (see there), the one model description of
// the engine, under the name this package has always used.
type Spec = models.Spec

// Metadata keys of a model file that describe its network (see Spec);
// they are those of package models.
const (
	KeyModel      = models.KeyModel
	KeyWidth      = models.KeyWidth
	KeyShortcut   = models.KeyShortcut
	KeyNumClasses = models.KeyNumClasses
	KeyMean       = models.KeyMean
	KeyStd        = models.KeyStd
	KeyClasses    = models.KeyClasses
	KeyWidths     = models.KeyWidths
)

// SpecFromMetadata reads the Key entries of model-file metadata; it is
// models.SpecFromMetadata.
func SpecFromMetadata(meta map[string]string) (Spec, error) {
	return models.SpecFromMetadata(meta)
}
