// The samebits command-line tool.
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("samebits %s\n", SAMEBITS_VERSION);
    return 0;
  }
  std::fprintf(stderr, "usage: samebits --version\n");
  return 2;
}
