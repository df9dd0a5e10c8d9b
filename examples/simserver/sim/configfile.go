package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// modelsFile is the YAML schema of a models file.
type modelsFile struct {
	Models []ModelConfig `yaml:"models"`
}

// LoadModels reads a YAML models file ("models:" followed by a list of
// ModelConfig). The list replaces DefaultModels entirely; unknown keys are
// errors, and every model is validated.
func LoadModels(path string) ([]ModelConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: read models file: %w", err)
	}
	models, err := ParseModels(data)
	if err != nil {
		return nil, fmt.Errorf("sim: models file %s: %w", path, err)
	}
	return models, nil
}

// ParseModels parses and validates the YAML of a models file.
func ParseModels(data []byte) ([]ModelConfig, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f modelsFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("sim: parse models: %w", err)
	}
	if len(f.Models) == 0 {
		return nil, errors.New("sim: models: the list is empty")
	}
	if err := validateModels(f.Models); err != nil {
		return nil, err
	}
	return f.Models, nil
}

// validateModels validates each model and rejects duplicate names.
func validateModels(models []ModelConfig) error {
	var errs []error
	seen := make(map[string]bool, len(models))
	for i := range models {
		m := &models[i]
		if err := m.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[m.Name] {
			errs = append(errs, fmt.Errorf("sim: model %q: name: duplicated", m.Name))
		}
		seen[m.Name] = true
	}
	return errors.Join(errs...)
}
