package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/infergate/infergate/alert"
)

// rulesCommand runs `infergate rules export [--rules FILE] [--config
// FILE]`: it prints the threshold, error and SLO rules (the built-in
// ones when no rules are configured) as a Prometheus rule file.
func rulesCommand(args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] != "export" {
		fmt.Fprintln(errOut, "usage: infergate rules export [--rules FILE] [--config FILE]")
		return 2
	}
	fs := flag.NewFlagSet("infergate rules export", flag.ContinueOnError)
	fs.SetOutput(errOut)
	rulesFile := fs.String("rules", "", "YAML file of alert rules")
	configFile := fs.String("config", "", "infergate YAML config (its rules:, slo: and alerting: sections)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	var c Config
	if *configFile != "" {
		var err error
		if c, err = loadFile(*configFile); err != nil {
			fmt.Fprintln(errOut, "infergate:", err)
			return 2
		}
	}
	c.RulesFile = *rulesFile
	if errs := c.alertingConfig(); len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintln(errOut, "infergate:", e)
		}
		return 2
	}
	b, err := alert.ExportPrometheus(c.alerts)
	if err != nil {
		fmt.Fprintln(errOut, "infergate:", err)
		return 1
	}
	out.Write(b)
	return 0
}
