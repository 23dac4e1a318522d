package trust

import (
	"maps"
	"slices"
	"strconv"

	"github.com/loopd/loopd/internal/backlog"
)

// KindTasks is a backlog's task list (tasks_file, or loopctl start --tasks)
// when it names commands: a task's verify_command, or its set (which can
// change any command the task run uses).
const KindTasks Kind = "tasks"

// DescribeTasks describes a task list's content: the commands it names,
// keyed by the JSON path of the task's value (tasks[2].verify_command,
// tasks[0].set.agent_command). A list that does not parse is described
// with no commands: start refuses it, naming the problem, before it could
// run anything.
func DescribeTasks(path string, data []byte) (File, error) {
	f := File{Path: path, Kind: KindTasks, SHA256: Sum(data)}
	list, err := backlog.Parse(path, data)
	if err != nil {
		return f, nil
	}
	for i, t := range list.Tasks {
		at := "tasks[" + strconv.Itoa(i) + "]"
		if t.VerifyCommand != "" {
			f.Commands = append(f.Commands, Command{Key: at + ".verify_command", Command: t.VerifyCommand})
		}
		for _, k := range slices.Sorted(maps.Keys(t.Set)) {
			f.Commands = append(f.Commands, Command{Key: at + ".set." + k, Command: k + "=" + t.Set[k]})
		}
	}
	return f, nil
}
