package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/api"
	"github.com/loopd/loopd/internal/termtext"
)

type listOptions struct {
	*globalOptions
	Status string
	All    bool
	Limit  int
}

func newListCmd(g *globalOptions) *cobra.Command {
	o := &listOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs of this workspace, newest first",
		Args:  cobra.NoArgs,
		RunE:  o.run,
	}
	cmd.Flags().StringVar(&o.Status, "status", "", "only runs in this status (PENDING, RUNNING, PAUSED, WAITING, COMPLETED, FAILED, ABORTED, INTERRUPTED)")
	cmd.Flags().BoolVar(&o.All, "all-workspaces", false, "runs of every workspace")
	cmd.Flags().IntVar(&o.Limit, "limit", 20, "at most this many runs")
	return cmd
}

func (o *listOptions) run(cmd *cobra.Command, _ []string) error {
	st := api.RunStatus(strings.ToUpper(o.Status))
	if st != "" && !st.Valid() {
		return usageErrorf("--status %q: use PENDING, RUNNING, PAUSED, WAITING, COMPLETED, FAILED, ABORTED or INTERRUPTED", o.Status)
	}
	if o.Limit < 1 {
		return usageErrorf("--limit must be at least 1")
	}
	opts := api.ListOptions{Status: st, Limit: o.Limit}
	if !o.All {
		ws, err := o.workspace()
		if err != nil {
			return err
		}
		opts.Workspace = ws
	}
	ctx := cmd.Context()
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	runs, err := c.ListRuns(ctx, opts)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, runs)
	}
	if len(runs) == 0 {
		where := "this workspace"
		if o.All {
			where = "any workspace"
		}
		if st != "" {
			// "no runs" would deny the runs the filter left out.
			fmt.Fprintf(o.Err, "no runs with status %s in %s\n", st, where)
			return nil
		}
		fmt.Fprintf(o.Err, "no runs in %s\n", where)
		return nil
	}
	// A fleet's runs name their worker; the embedded daemon's have none,
	// and their table is unchanged.
	fleet := false
	for _, r := range runs {
		fleet = fleet || r.Worker != ""
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	if fleet {
		fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tITER\tCOST\tCREATED\tWORKER\tREASON")
	} else {
		fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tITER\tCOST\tCREATED\tREASON")
	}
	for _, r := range runs {
		name := r.Name
		if name == "" {
			name = "-"
		}
		if o.All {
			name += " (" + r.Workspace + ")"
		}
		created := ago(r.CreatedAt)
		if fleet {
			worker := r.Worker
			if worker == "" {
				worker = "-"
			}
			created += "\t" + termtext.Quote(truncate(worker, 30))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", shortID(r.ID), termtext.Quote(truncate(name, 40)), r.Status, r.Iteration,
			cost(r.Usage), created, termtext.Quote(truncate(r.Reason, 50)))
	}
	return tw.Flush()
}
