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
// # Where it is used
//
// The scheduler reads the list once at start (internal/scheduler's
// backlog_create.go: tasks_file through internal/trust's ReadFile and
// [Parse], the stdout of tasks_command named "tasks_command"), checks each
// task's set as config keys, and stores the tasks in the backlog run's
// creating transaction; internal/trust describes a list that
// [List.NamesCommands] (kind tasks). From then on the tasks live in the
// database: the backlog's coordinator (backlog.go) derives what is ready
// from the stored states, not from this package. [List.Ordered] is the
// dependency order a view lists tasks in.
package backlog
