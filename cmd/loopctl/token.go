package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/loopd/loopd/internal/termtext"
)

type tokenOptions struct {
	*globalOptions
}

func newTokenCmd(g *globalOptions) *cobra.Command {
	o := &tokenOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Make, list and revoke the bearer tokens users reach a fleet's API nodes with",
		Long: `A fleet's users run loopctl with LOOPD_URL (an API node) and LOOPD_TOKEN.
The API node's own LOOPD_HOME/http.token is the first token; token create NAME
makes one for a user, printed once: every API node of the fleet accepts it
until token revoke NAME. Only a SHA-256 of each token is stored.

Tokens are made, listed and revoked on an API node's socket, or through
LOOPD_URL with the node's own http.token; a user's token cannot manage tokens.
A token is not a dashboard session (see loopctl dashboard).`,
		Example: `  loopctl token create alice
  LOOPD_URL=https://loopd.example.com LOOPD_TOKEN=$(cat http.token) loopctl token list
  loopctl token revoke alice`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "create NAME",
		Short: "Make a token for the user NAME and print it (once)",
		Args:  cobra.ExactArgs(1),
		RunE:  o.create,
	}, &cobra.Command{
		Use:   "list",
		Short: "List the tokens, in use and revoked (never their secrets)",
		Args:  cobra.NoArgs,
		RunE:  o.list,
	}, &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke the token of the user NAME on every API node",
		Args:  cobra.ExactArgs(1),
		RunE:  o.revoke,
	})
	return cmd
}

func (o *tokenOptions) create(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	tok, err := c.CreateToken(ctx, args[0])
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, tok)
	}
	// The token alone on stdout, for a pipe; the rest on stderr.
	fmt.Fprintln(o.Out, tok.Secret)
	fmt.Fprintf(o.Err, "token %s for %s: give it to them as LOOPD_TOKEN; it is not shown again\n",
		tok.ID, termtext.Quote(tok.Name))
	return nil
}

func (o *tokenOptions) list(cmd *cobra.Command, _ []string) error {
	ctx := cmd.Context()
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	toks, err := c.Tokens(ctx)
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, toks)
	}
	if len(toks) == 0 {
		fmt.Fprintln(o.Out, "no tokens yet (loopctl token create NAME); the API node's http.token always works")
		return nil
	}
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCREATED\tREVOKED")
	for _, t := range toks {
		revoked := "-"
		if t.RevokedAt != nil {
			revoked = t.RevokedAt.Local().Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, termtext.Quote(t.Name), t.CreatedAt.Local().Format(time.DateTime), revoked)
	}
	return tw.Flush()
}

func (o *tokenOptions) revoke(cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	tok, err := c.RevokeToken(ctx, args[0])
	if err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.Out, tok)
	}
	fmt.Fprintf(o.Out, "revoked token %s of %s\n", tok.ID, termtext.Quote(tok.Name))
	return nil
}
