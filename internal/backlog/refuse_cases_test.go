package backlog

import "strings"

type refusal struct {
	name, file, input, want string
}

func bigTasks(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("- [ ] task ")
		b.WriteString(strings.Repeat("x", i%3))
		b.WriteString("\n")
	}
	return b.String()
}

var refusals = []refusal{
	// Markdown.
	{"markdown: no items", "plan.md", "# Plan\n\n- not a checkbox\n  - [ ] nested only\n```\n- [ ] fenced\n```\n", "plan.md: the list has no tasks (a task is a top-level \"- [ ] title\" line)"},
	{"markdown: empty file", "plan.md", "", "plan.md: the list has no tasks (a task is a top-level \"- [ ] title\" line)"},
	{"markdown: unknown dependency with a suggestion", "plan.md", "# Plan\n- [ ] schema {#schema}\n- [ ] api (after #shema)\n", "plan.md:3: task \"t2\" depends on \"shema\", which is not in the list (did you mean \"schema\"?)"},
	{"markdown: cycle named from its first task", "plan.md", "- [ ] a (after #c) {#a}\n- [ ] b (after #a) {#b}\n- [ ] c (after #b) {#c}\n", "plan.md:1: dependency cycle: a -> c -> b -> a (each depends on the next)"},
	{"markdown: a task after itself", "plan.md", "- [ ] a (after #a) {#a}\n", "plan.md:1: dependency cycle: a -> a (each depends on the next)"},
	{"markdown: duplicate id, also against a positional one", "plan.md", "- [ ] one\n- [ ] two {#T1}\n", "plan.md:2: duplicate task id \"T1\" (first at line 1)"},
	{"markdown: unsafe id", "plan.md", "- [ ] one {#../../etc}\n", "plan.md:1: task id \"../../etc\" is not safe: use 1 to 64 letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")"},
	{"markdown: empty {#}", "plan.md", "- [ ] one {#}\n", "plan.md:1: task id \"\" is not safe: use 1 to 64 letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")"},
	{"markdown: no title", "plan.md", "- [ ]\n- [ ] {#x}\n", "plan.md:1: task \"t1\" has no title\nplan.md:2: task \"x\" has no title"},
	{"markdown: control characters in a title are quoted", "plan.md", "- [ ] fix \x1b[2K\rall tests\n", "plan.md:1: title holds a control character: \"fix \\x1b[2K\\rall tests\""},
	{"markdown: bidi override in a title", "plan.md", "- [ ] evil \u202etxt.exe\n", "plan.md:1: title holds a control character: \"evil \\u202etxt.exe\""},
	{"markdown: invalid UTF-8 in a title", "plan.md", "- [ ] bad \xff byte\n", "plan.md:1: title is not valid UTF-8: \"bad \\xff byte\""},
	{"markdown: dependency not written #id", "plan.md", "- [ ] a {#a}\n- [ ] b (after a)\n", "plan.md:2: (after …) lists \"a\": write each dependency as #id"},
	{"markdown: (after) with nothing", "plan.md", "- [ ] a (after )\n", "plan.md:1: (after) names no task; write (after #id, …)"},
	{"markdown: two (after …)", "plan.md", "- [ ] a {#a}\n- [ ] b (after #a) and (after #a)\n", "plan.md:2: more than one (after …) in the title; list every dependency in one"},
	{"markdown: too many tasks", "plan.md", bigTasks(MaxTasks + 1), "plan.md: the list has 1001 tasks, more than 1000"},
	{"markdown: title too long", "plan.md", "- [ ] " + strings.Repeat("y", MaxTitleLen+1) + "\n", "plan.md:1: title longer than 1024 bytes"},
	// loopd tasks.json.
	{"tasks.json: unknown field with a suggestion", "tasks.json", `{"tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","depends-on":["a"]}]}`, "tasks.json: tasks[1][\"depends-on\"]: unknown field in a task (did you mean depends_on?)"},
	{"tasks.json: unknown field without one", "tasks.json", `{"tasks":[{"id":"a","title":"A","owner":"me"}]}`, "tasks.json: tasks[0].owner: unknown field in a task (fields: id, title, description, depends_on, verify_command, set, priority, done)"},
	{"tasks.json: unknown top-level field", "tasks.json", `{"tasks":[{"id":"a","title":"A"}],"goal":"x"}`, "tasks.json: goal: unknown field in the task list (fields: tasks)"},
	{"tasks.json: unknown field with control characters in its name", "tasks.json", "{\"tasks\":[{\"id\":\"a\",\"title\":\"A\",\"\\u001b[31m\":1}]}", "tasks.json: tasks[0][\"\\x1b[31m\"]: unknown field in a task (fields: id, title, description, depends_on, verify_command, set, priority, done)"},
	{"tasks.json: unknown dependency", "tasks.json", `{"tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","depends_on":["a","zzz"]}]}`, "tasks.json: tasks[1].depends_on[1]: task \"b\" depends on \"zzz\", which is not in the list"},
	{"tasks.json: cycle", "tasks.json", `{"tasks":[{"id":"a","title":"A","depends_on":["b"]},{"id":"b","title":"B","depends_on":["a"]}]}`, "tasks.json: tasks[0].depends_on[0]: dependency cycle: a -> b -> a (each depends on the next)"},
	{"tasks.json: duplicate ids differing in case", "tasks.json", `{"tasks":[{"id":"Api","title":"A"},{"id":"b","title":"B"},{"id":"api","title":"C"}]}`, "tasks.json: tasks[2].id: duplicate task id \"api\" (first at tasks[0].id)"},
	{"tasks.json: empty list", "tasks.json", `{"tasks":[]}`, "tasks.json: tasks: the list has no tasks"},
	{"tasks.json: tasks missing", "tasks.json", `{}`, "tasks.json: a JSON task list is an object with \"tasks\" (loopd) or \"userStories\" (prd.json), or the array gh issue list --json prints"},
	{"tasks.json: tasks not an array", "tasks.json", `{"tasks":{"id":"a"}}`, "tasks.json: tasks: expected an array of tasks, got object"},
	{"tasks.json: task not an object", "tasks.json", `{"tasks":["a"]}`, "tasks.json: tasks[0]: expected an object, got string \"a\""},
	{"tasks.json: missing id and title", "tasks.json", `{"tasks":[{"description":"d"}]}`, "tasks.json: tasks[0]: missing field \"id\"\ntasks.json: tasks[0]: missing field \"title\""},
	{"tasks.json: bad types, every one reported", "tasks.json", `{"tasks":[{"id":7,"title":true,"depends_on":"a","verify_command":["go","test"],"priority":"high","done":"yes"}]}`, "tasks.json: tasks[0].id: expected a string, got number 7\ntasks.json: tasks[0].title: expected a string, got boolean\ntasks.json: tasks[0].depends_on: expected an array of strings, got string \"a\"\ntasks.json: tasks[0].verify_command: expected a string, got array\ntasks.json: tasks[0].priority: expected an integer, got string \"high\"\ntasks.json: tasks[0].done: expected true or false, got string \"yes\""},
	{"tasks.json: depends_on holds a number", "tasks.json", `{"tasks":[{"id":"a","title":"A"},{"id":"b","title":"B","depends_on":["a",3]}]}`, "tasks.json: tasks[1].depends_on[1]: expected a string, got number 3"},
	{"tasks.json: priority out of range and fractional", "tasks.json", `{"tasks":[{"id":"a","title":"A","priority":0},{"id":"b","title":"B","priority":1.5},{"id":"c","title":"C","priority":99999999999999999999}]}`, "tasks.json: tasks[0].priority: priority must be from 1 (first) to 1000000, got 0\ntasks.json: tasks[1].priority: expected an integer, got 1.5\ntasks.json: tasks[2].priority: integer 99999999999999999999 is out of range"},
	{"tasks.json: set with a bad key and a non-string value", "tasks.json", `{"tasks":[{"id":"a","title":"A","set":{"Max Cost":"1","max_cost":1}}]}`, "tasks.json: tasks[0].set[\"Max Cost\"]: \"Max Cost\" is not a config key (lowercase letters, digits, _ . -)\ntasks.json: tasks[0].set.max_cost: expected a string, got number 1"},
	{"tasks.json: set not an object", "tasks.json", `{"tasks":[{"id":"a","title":"A","set":["max_cost=1"]}]}`, "tasks.json: tasks[0].set: expected an object, got array"},
	{"tasks.json: duplicate field", "tasks.json", `{"tasks":[{"id":"a","title":"A","id":"b"}]}`, "tasks.json: tasks[0].id: duplicate field"},
	{"tasks.json: unsafe id", "tasks.json", `{"tasks":[{"id":"a b","title":"A"},{"id":".hidden","title":"B"},{"id":"x.lock","title":"C"},{"id":"","title":"D"}]}`, "tasks.json: tasks[0].id: task id \"a b\" is not safe: use 1 to 64 letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")\ntasks.json: tasks[1].id: task id \".hidden\" is not safe: use 1 to 64 letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")\ntasks.json: tasks[2].id: task id \"x.lock\" is not safe: use 1 to 64 letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")\ntasks.json: tasks[3].id: task id \"\" is not safe: use 1 to 64 letters, digits and . _ # - (starting with a letter, digit or #; no \"..\"; not ending in \".\" or \".lock\")"},
	{"tasks.json: control character in a title", "tasks.json", `{"tasks":[{"id":"a","title":"A\u0007\u009b"}]}`, "tasks.json: tasks[0].title: title holds a control character: \"A\\a\\u009b\""},
	{"tasks.json: invalid JSON names the line and column", "tasks.json", "{\"tasks\": [\n  {\"id\": \"a\",}\n]}", "tasks.json:2: invalid JSON at column 14: invalid character '}' looking for beginning of object key string"},
	{"tasks.json: truncated JSON", "tasks.json", "{\"tasks\": [", "tasks.json: invalid JSON: unexpected end of input"},
	{"tasks.json: data after the value", "tasks.json", "{\"tasks\":[{\"id\":\"a\",\"title\":\"A\"}]}\n{}", "tasks.json:2: invalid JSON at column 1: more data after the top-level value"},
	{"json: neither tasks nor userStories", "list.json", `{"stories":[]}`, "list.json: a JSON task list is an object with \"tasks\" (loopd) or \"userStories\" (prd.json), or the array gh issue list --json prints"},
	{"json: .json that is not JSON", "tasks.json", "- [ ] a markdown list in a .json file\n", "tasks.json:1: invalid JSON at column 2: invalid character ' ' in numeric literal"},
	// prd.json.
	{"prd.json: bad types", "prd.json", `{"userStories":[{"id":"US-1","title":"T","acceptanceCriteria":"typecheck passes","passes":"no","priority":-1}]}`, "prd.json: userStories[0].acceptanceCriteria: expected an array of strings, got string \"typecheck passes\"\nprd.json: userStories[0].passes: expected true or false, got string \"no\"\nprd.json: userStories[0].priority: priority must be from 1 (first) to 1000000, got -1"},
	{"prd.json: userStories not an array", "prd.json", `{"userStories":{}}`, "prd.json: userStories: expected an array of user stories, got object"},
	{"prd.json: empty", "prd.json", `{"userStories":[]}`, "prd.json: userStories: the list has no tasks"},
	{"prd.json: missing id", "prd.json", `{"userStories":[{"title":"T"}]}`, "prd.json: userStories[0]: missing field \"id\""},
	{"prd.json: duplicate story ids", "prd.json", `{"userStories":[{"id":"US-1","title":"T"},{"id":"US-1","title":"U"}]}`, "prd.json: userStories[1].id: duplicate task id \"US-1\" (first at userStories[0].id)"},
	// gh issue list.
	{"github: empty array", "tasks_command", `[]`, "tasks_command: the list has no tasks"},
	{"github: issue without a number", "tasks_command", `[{"title":"T","body":""}]`, "tasks_command: [0]: missing field \"number\" (list the issues with gh issue list --json number,title,body,labels)"},
	{"github: number not an integer", "tasks_command", `[{"number":"12","title":"T"},{"number":0,"title":"U"}]`, "tasks_command: [0].number: expected an integer, got string \"12\"\ntasks_command: [1].number: an issue number is positive, got 0"},
	{"github: labels as names, not gh's objects", "tasks_command", `[{"number":1,"title":"T","labels":["bug"]}]`, "tasks_command: [0].labels[0]: expected an object, got string \"bug\""},
	{"github: label name not a string", "tasks_command", `[{"number":1,"title":"T","labels":[{"id":"x","name":3}]}]`, "tasks_command: [0].labels[0].name: expected a string, got number 3"},
	{"github: not an array of objects", "tasks_command", `[1]`, "tasks_command: [0]: expected an object, got number 1"},
	{"github: duplicate issue", "tasks_command", `[{"number":1,"title":"T"},{"number":1,"title":"T"}]`, "tasks_command: [1].number: duplicate task id \"#1\" (first at [0].number)"},
	{"github: escape sequence in a title", "tasks_command", `[{"number":1,"title":"\u001b]8;;http://evil\u0007click\u001b]8;;\u0007"}]`, "tasks_command: [0].title: title holds a control character: \"\\x1b]8;;http://evil\\aclick\\x1b]8;;\\a\""},
	// Size.
	{"oversize input", "plan.md", strings.Repeat("a", MaxSize+1), "plan.md: the task list is larger than 4 MiB"},
	{"a description too long", "tasks.json", `{"tasks":[{"id":"a","title":"A","description":"` + strings.Repeat("d", MaxDescriptionLen+1) + `"}]}`, "tasks.json: tasks[0].description: description longer than 256 KiB"},
}
