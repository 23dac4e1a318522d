package crash

func Div(a, b int) int { return a / b }
