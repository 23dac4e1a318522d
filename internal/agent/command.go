package agent

// Command runs agent_command as it is: any program that reads the prompt
// on stdin (or from $LOOP_PROMPT_FILE). Its output may be any agent's, or
// plain text with loopd's generic usage lines; it may print reconnect
// notices (it may be Codex in a wrapper), so its log is watched for them.
var Command = &Agent{
	Name:             "command",
	Title:            "your own agent_command",
	PrintsReconnects: true,
}
