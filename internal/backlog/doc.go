// Package backlog reads a task list (a plan, a PRD, a set of GitHub issues)
// into a validated, typed [List], and answers the two questions a backlog
// run asks of it before it touches a database or a scheduler: which tasks
// may start now ([List.Ready]) and whether the list names commands
// ([List.NamesCommands]). It is pure: it reads bytes and returns values
// ([ReadFile] reads the one file it is given); it never writes, runs a
// command or reads the clock.
//
// # What it is for
//
// A backlog run works through a list task by task: each task in its own
// worktree, each landed into the backlog's integration branch only after it
// was tested together with what already landed. The list is read once, at
// `loopctl start --tasks FILE` (or from config `tasks_file`, or the stdout
// of `tasks_command`), and then kept in the database: an agent that edits
// the file afterwards changes nothing. A bad list is refused before anything
// is created, with the file and the line (Markdown) or the JSON path
// (tasks[3].depends_on[0]) of every problem, as an [*Error] each (joined
// with [errors.Join]).
//
// # Formats
//
// Four forms are read, each as the tool that writes it writes it:
//
//   - [FormatTasks], loopd's own JSON:
//     {"tasks":[{"id","title","description","depends_on":[],"verify_command","set":{},"priority","done"}]}.
//     id and title are required. It is read strictly: an unknown field (a
//     typo such as "depends-on") is an error, not silently ignored. It is
//     the only form that can name commands (verify_command, set).
//   - [FormatPRD], snarktank/ralph's prd.json:
//     {"userStories":[{"id","title","description","acceptanceCriteria","priority","passes"}]}.
//     passes: true means already done; the acceptance criteria (and notes)
//     are appended to the description. Other fields (project, branchName,
//     notes, the extra fields other ralph variants add) are ignored, but the
//     fields read must have the right types.
//   - [FormatGitHub], the array `gh issue list --json number,title,body,labels`
//     prints: task id "#<number>", title, body as the description. Labels
//     must be the objects gh prints ({id,name,description,color}) and are
//     otherwise unused; other fields gh may add (--json url,state) are
//     ignored. Issues carry no dependencies and no commands.
//   - [FormatMarkdown], a checklist: every top-level "- [ ]" item ("*" and
//     "+" bullets too) is a task in file order, "- [x]" one already done;
//     its text is the title and its indented lines (up to the next line that
//     is not indented) the description. "{#id}" at the end of the title (an
//     "(after …)" may follow it) names the task, else it is t1, t2, … by its
//     position among the items; "(after #a, #b)" in the title gives its
//     dependencies. Items inside a
//     fenced code block and nested items are not tasks.
//
// # Detection
//
// [Parse] decides by content, with the file name's extension as a hint
// ([Detect]): a name ending in .md, .markdown or .txt is Markdown whatever it
// holds. Otherwise input whose first non-blank byte is '[' is gh's issue
// array; '{' is a JSON object, loopd's form when it has "tasks" and a
// prd.json when it has "userStories" (and neither is an error naming both);
// anything else is Markdown, except under a .json name, where it is invalid
// JSON. [ParseAs] skips detection.
//
// # What is refused
//
// An empty list; more than [MaxTasks] tasks or more than [MaxSize] bytes;
// invalid JSON or a value of the wrong type; an unknown field in loopd's
// form; duplicate ids (compared without case, since ids become file and
// branch names on case-insensitive file systems too); ids that are not safe
// (see [ValidID]); a dependency on an id that is not in the list (with a
// "did you mean"); a dependency cycle (named: a -> b -> a); a title that is
// empty, too long, or holds control characters. Every value from the input
// that an error shows is quoted with [termtext.Quote], so an error printed
// on a terminal shows the bytes instead of obeying them.
//
// # What comes next (not built yet)
//
// This package is the foundation of the backlog feature and nothing calls
// it yet. The next engineer wires, in this order:
//
//   - start: `loopctl start --tasks FILE [GOAL…]`, config tasks_file and
//     tasks_command, read through [ReadFile] or [Parse] (name the stdout of
//     tasks_command "tasks_command"; bound what is read to [MaxSize]) in the
//     scheduler's start checks, refused with exit 64 and nothing created on
//     error. A list for which [List.NamesCommands] is true is a workspace
//     file under trust: `loopctl trust` must show its commands and hash it
//     like .loop/config, and start must refuse it until trusted. Task.Set
//     keys are checked here only for shape: start must validate them as
//     config keys (a task run gets the backlog's frozen config plus its own
//     settings).
//   - storage: the backlog is a run; a tasks table (backlog run id, task
//     id, position, title, description, depends_on, verify_command, set,
//     priority, done, state, reason, task run id, landed commit) written in
//     the same transaction that creates the backlog run, so the list is read
//     once and an agent rewriting the file changes nothing.
//   - the planner (internal/scheduler's planner.go, for a backlog run):
//     derive every task's state from the database and the task runs; call
//     [List.Ready] with the set of landed ids, drop the tasks that are
//     running, waiting, landing, blocked or skipped, and start at most
//     max_parallel_tasks of what is left, in the order Ready returns
//     (priority first when given, then list order). Landing each task goes
//     through internal/landing, one at a time. The dashboard lists tasks in
//     [List.Ordered] order.
package backlog
