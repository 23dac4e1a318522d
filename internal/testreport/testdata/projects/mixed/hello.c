#include <stdio.h>

int main(int argc, char **argv) {
	int unused;
	printf("hello\n");
	return 0;
}
