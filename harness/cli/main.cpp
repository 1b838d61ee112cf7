#include "harness/cli/cli.h"

int main(int argc, char** argv) { return attnbench::run_cli(argc, argv); }
