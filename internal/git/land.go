package git

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/loopd/loopd/internal/shquote"
	"github.com/loopd/loopd/internal/termtext"
)

// LandMode is how a run's branch reached its base branch.
type LandMode string

const (
	LandFastForward LandMode = "fast-forward" // the base branch moved to the run's last commit
	LandMerge       LandMode = "merge"        // the base had moved: a merge commit of the two
	LandSquash      LandMode = "squash"       // one new commit on the base with the run's (combined) tree
)

// RefusalKind says why a land was refused; each kind leaves the user's
// checkout exactly as it was.
type RefusalKind string

const (
	RefusedActive        RefusalKind = "active"         // the run has not ended
	RefusedNotWorktree   RefusalKind = "not_worktree"   // an in-place run has no branch to land
	RefusedBranchMissing RefusalKind = "branch_missing" // the run's branch was deleted
	RefusedWrongBranch   RefusalKind = "wrong_branch"   // the checkout is not on the base branch
	RefusedDirty         RefusalKind = "dirty"          // the checkout has uncommitted changes (or a merge in progress)
	RefusedConflict      RefusalKind = "conflict"       // the run's branch and the base branch conflict
	RefusedUntested      RefusalKind = "untested"       // the run's last verification did not pass on its last commit
	RefusedVerifyFailed  RefusalKind = "verify_failed"  // the combination of base and run failed verify_command
	RefusedNothing       RefusalKind = "nothing_to_land"
	RefusedBaseMoved     RefusalKind = "base_moved" // the base branch moved while land was working
	RefusedWorktreeGone  RefusalKind = "worktree_gone"
	RefusedCheckout      RefusalKind = "checkout_failed" // git itself refused to update the checkout
	RefusedBusy          RefusalKind = "busy"            // another land into the same repository is under way
	RefusedUntrustedEnv  RefusalKind = "untrusted_env"   // the run's env_file changed since it was trusted
)

// Refusal is a land that changed nothing in the user's checkout: why, and
// the git commands that finish the job by hand.
type Refusal struct {
	Kind    RefusalKind
	Message string
	Files   []string // conflicting or uncommitted files (capped)
	Hand    []string // shell commands to finish by hand
}

func (r *Refusal) Error() string { return r.Message }

// LandInput names what to land where.
type LandInput struct {
	Checkout   string // the user's checkout (the run's workspace)
	Branch     string // the run's branch, loop/<short-id>
	BaseBranch string // the branch the run started from
	BaseCommit string // the base branch's commit when the run started
	Squash     bool
	Message    string // the merge or squash commit's message
	// Push says the branch is pushed, not landed in the checkout: the
	// checkout's branch and state do not matter (it is never touched).
	Push bool
}

// LandPlan is a land worked out without touching the checkout.
type LandPlan struct {
	Input   LandInput
	BaseTip string // the base branch's commit now
	RunTip  string // the run branch's last commit
	// Moved is true when the base branch has commits the run did not
	// start from: the two must be combined, and the combination tested.
	Moved bool
	// Combined is the merge commit of BaseTip and RunTip when Moved (not
	// on any branch yet): what verification runs on.
	Combined string
	Mode     LandMode
	Target   string // the commit the base branch fast-forwards to
}

// maxListed caps the file names a refusal lists.
const maxListed = 20

// handMerge are the commands that land a branch by hand in checkout.
func handMerge(in LandInput) []string {
	return []string{
		"cd " + shquote.Quote(in.Checkout),
		"git switch " + shquote.Quote(in.BaseBranch),
		"git merge " + shquote.Quote(in.Branch) + "   # resolve any conflicts, run your tests, then git commit",
	}
}

// PlanLand checks the checkout and works out what landing would do. It
// writes objects (a merge or squash commit, unreferenced) but no ref, index
// or working tree; a *Refusal says why the land cannot happen.
func PlanLand(ctx context.Context, in LandInput) (*LandPlan, error) {
	if !in.Push {
		if err := CheckCheckout(ctx, in); err != nil {
			return nil, err
		}
	}
	co := Cmd{Dir: in.Checkout}
	runTip, err := co.Output(ctx, "rev-parse", "-q", "--verify", "refs/heads/"+in.Branch+"^{commit}")
	if err != nil || runTip == "" {
		return nil, &Refusal{Kind: RefusedBranchMissing,
			Message: fmt.Sprintf("the run's branch %s no longer exists: there is nothing to land", in.Branch)}
	}
	baseTip, err := co.Output(ctx, "rev-parse", "--verify", "refs/heads/"+in.BaseBranch+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("read base branch %s: %w", in.BaseBranch, err)
	}
	if in.Message == "" {
		in.Message = fmt.Sprintf("Land %s into %s", in.Branch, in.BaseBranch)
	}
	p := &LandPlan{Input: in, BaseTip: baseTip, RunTip: runTip}
	if runTip == baseTip || isAncestor(ctx, co, runTip, baseTip) {
		return nil, &Refusal{Kind: RefusedNothing,
			Message: fmt.Sprintf("nothing to land: %s has no commit that %s does not already have", in.Branch, in.BaseBranch)}
	}
	p.Moved = !isAncestor(ctx, co, baseTip, runTip)
	tree := runTip + "^{tree}"
	if p.Moved {
		out, err := co.Run(ctx, "merge-tree", "--write-tree", "--name-only", "--no-messages", baseTip, runTip)
		if err != nil {
			var ge *Error
			if errors.As(err, &ge) && ge.Code == 1 {
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				files := lines[1:]
				return nil, &Refusal{Kind: RefusedConflict, Files: capList(files),
					Message: fmt.Sprintf("%s and %s conflict in %d file(s): %s", in.Branch, in.BaseBranch,
						len(files), FileList(capList(files))),
					Hand: handMerge(in)}
			}
			if errors.As(err, &ge) && ge.Code == 129 { // usage: a git older than 2.38
				return nil, fmt.Errorf("combine %s with %s: git merge-tree --write-tree needs git 2.38 or newer: %w", in.Branch, in.BaseBranch, err)
			}
			return nil, fmt.Errorf("combine %s with %s: %w", in.Branch, in.BaseBranch, err)
		}
		tree = strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
		msg := in.Message
		if in.Squash { // the merge is only what is tested; the squash commit carries the message
			msg = fmt.Sprintf("Merge branch '%s' into %s", in.Branch, in.BaseBranch)
		}
		if p.Combined, err = commitTree(ctx, co, tree, msg, baseTip, runTip); err != nil {
			return nil, err
		}
	}
	switch {
	case in.Squash:
		// The run's changes may already be on the base (the same edit
		// landed from another run): a squash would be an empty commit.
		treeID, err := co.Output(ctx, "rev-parse", "--verify", tree+"^{tree}")
		if err != nil {
			return nil, fmt.Errorf("read the tree to land: %w", err)
		}
		baseTree, err := co.Output(ctx, "rev-parse", "--verify", baseTip+"^{tree}")
		if err != nil {
			return nil, fmt.Errorf("read the tree of %s: %w", in.BaseBranch, err)
		}
		if treeID == baseTree {
			return nil, &Refusal{Kind: RefusedNothing,
				Message: fmt.Sprintf("nothing to land: %s already has every change of %s (a squash would be an empty commit)",
					in.BaseBranch, in.Branch)}
		}
		p.Mode = LandSquash
		if p.Target, err = commitTree(ctx, co, tree, in.Message, baseTip); err != nil {
			return nil, err
		}
	case p.Moved:
		p.Mode, p.Target = LandMerge, p.Combined
	default:
		p.Mode, p.Target = LandFastForward, runTip
	}
	return p, nil
}

// CheckCheckout refuses a checkout that is not on the base branch, has
// uncommitted changes to tracked files, or is in the middle of a merge.
// Untracked files do not count: git itself refuses to overwrite one.
func CheckCheckout(ctx context.Context, in LandInput) error {
	co := Cmd{Dir: in.Checkout}
	head, err := co.Output(ctx, "symbolic-ref", "-q", "--short", "HEAD")
	if err != nil || head != in.BaseBranch {
		on := "a detached HEAD"
		if head != "" {
			on = "branch " + head
		}
		return &Refusal{Kind: RefusedWrongBranch,
			Message: fmt.Sprintf("the checkout %s is on %s, not on %s, the branch the run started from", in.Checkout, on, in.BaseBranch),
			Hand: []string{"git -C " + shquote.Quote(in.Checkout) + " switch " + shquote.Quote(in.BaseBranch) + "   # then loopctl land again",
				"# or land by hand, after that switch: git merge " + shquote.Quote(in.Branch)}}
	}
	if _, err := co.Output(ctx, "rev-parse", "-q", "--verify", "MERGE_HEAD"); err == nil {
		return &Refusal{Kind: RefusedDirty,
			Message: fmt.Sprintf("the checkout %s is in the middle of a merge", in.Checkout),
			Hand:    []string{"git -C " + shquote.Quote(in.Checkout) + " merge --abort   # or finish it with git commit; then loopctl land again"}}
	}
	out, err := co.Run(ctx, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--ignore-submodules=dirty")
	if err != nil {
		return fmt.Errorf("status of %s: %w", in.Checkout, err)
	}
	var files []string
	for e := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
		if len(e) > 3 && e[2] == ' ' {
			files = append(files, e[3:])
		}
	}
	if len(files) > 0 {
		return &Refusal{Kind: RefusedDirty, Files: capList(files),
			Message: fmt.Sprintf("the checkout %s has uncommitted changes in %d file(s): %s", in.Checkout,
				len(files), FileList(capList(files))),
			Hand: []string{"git -C " + shquote.Quote(in.Checkout) + " stash   # or commit them; then loopctl land again",
				"# or land by hand: git merge " + shquote.Quote(in.Branch)}}
	}
	return nil
}

// ApplyLand moves the checkout's base branch to p.Target with a
// fast-forward, after checking again that the checkout is as PlanLand saw
// it. git either updates everything or nothing; the command is never
// cancelled once started (a killed git could leave a half-updated working
// tree), so ctx only bounds the checks before it.
func ApplyLand(ctx context.Context, p *LandPlan) error {
	in := p.Input
	if err := CheckCheckout(ctx, in); err != nil {
		return err
	}
	co := Cmd{Dir: in.Checkout}
	tip, err := co.Output(ctx, "rev-parse", "--verify", "refs/heads/"+in.BaseBranch+"^{commit}")
	if err != nil {
		return fmt.Errorf("read base branch %s: %w", in.BaseBranch, err)
	}
	if tip != p.BaseTip {
		return &Refusal{Kind: RefusedBaseMoved,
			Message: fmt.Sprintf("%s moved (to %s) while land was working; run loopctl land again", in.BaseBranch, short(tip))}
	}
	if _, err := co.Run(context.WithoutCancel(ctx), "merge", "--ff-only", "--quiet", p.Target); err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			return &Refusal{Kind: RefusedCheckout,
				Message: "git refused to update the checkout: " + strings.TrimSpace(ge.Stderr),
				Hand:    handMerge(in)}
		}
		return fmt.Errorf("fast-forward %s: %w", in.BaseBranch, err)
	}
	return nil
}

// CheckoutDetached puts worktree on commit, detached, so that a combination
// can be tested there without moving the run's branch. Like every git
// command that writes a working tree, it is never cancelled once started:
// a git killed mid-checkout (by a shutdown ending the land's request)
// leaves its index.lock behind, and git refuses the worktree from then on.
// ctx only bounds what comes before it; the caller checks it after.
func CheckoutDetached(ctx context.Context, worktree, commit string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := Cmd{Dir: worktree}.Run(context.WithoutCancel(ctx), "checkout", "--quiet", "--detach", commit)
	return err
}

// RestoreBranch puts worktree back on branch after a test of a
// combination. Files the test left behind stay; tracked files return to the
// branch's content.
func RestoreBranch(ctx context.Context, worktree, branch string) error {
	_, err := Cmd{Dir: worktree}.Run(context.WithoutCancel(ctx), "checkout", "--quiet", "--force", branch)
	return err
}

func isAncestor(ctx context.Context, c Cmd, a, b string) bool {
	_, err := c.Run(ctx, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// commitTree makes a commit of tree with parents, without touching any ref,
// with the user's identity or loopd's when the user has none.
func commitTree(ctx context.Context, c Cmd, tree, msg string, parents ...string) (string, error) {
	args := []string{"commit-tree", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	c.Stdin = []byte(msg + "\n")
	c.Env = append(c.Env, landIdentityEnv(ctx, c)...)
	out, err := c.Output(ctx, args...)
	if err != nil {
		return "", fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

// landIdentityEnv is loopd's identity for a commit in a repository whose
// user has configured none (git would refuse to commit); a configured
// identity is left alone: a land is the user's own merge.
func landIdentityEnv(ctx context.Context, c Cmd) []string {
	if _, err := c.Output(ctx, "var", "GIT_COMMITTER_IDENT"); err == nil {
		if _, err := c.Output(ctx, "var", "GIT_AUTHOR_IDENT"); err == nil {
			return nil
		}
	}
	return []string{"GIT_AUTHOR_NAME=loopd", "GIT_AUTHOR_EMAIL=loopd@localhost",
		"GIT_COMMITTER_NAME=loopd", "GIT_COMMITTER_EMAIL=loopd@localhost"}
}

// FileList joins file names for a message, each quoted as
// termtext.Quote does: a name may hold a line feed, and a message is shown
// on lines of its own (its line feeds kept), so a name such as
// "notes\nland refused (untested): …" would otherwise fake a line. The
// refusal's Files keep the names as they are.
func FileList(files []string) string {
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = termtext.Quote(f)
	}
	return strings.Join(quoted, ", ")
}

func capList(s []string) []string {
	if len(s) > maxListed {
		return append(s[:maxListed:maxListed], fmt.Sprintf("… and %d more", len(s)-maxListed))
	}
	return s
}

func short(commit string) string { return commit[:min(len(commit), 12)] }
