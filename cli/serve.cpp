// `samebits serve [MODEL] [OPTIONS]`: runs the Python server (python3 -m samebits.serve, docs/serving.md §1),
// which holds the HTTP stack, with the arguments as given; the global --threads / --simd travel as
// SAMEBITS_NUM_THREADS / SAMEBITS_SIMD, which the engine reads at start.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli.hpp"

namespace samebits::cli {

int command_serve(const std::vector<std::string>& args, const std::vector<std::string>& global_options) {
  for (std::size_t i = 0; i < global_options.size(); ++i) {
    const std::string& option = global_options[i];
    const std::size_t equals = option.find('=');
    const std::string name = option.substr(0, equals);
    std::string value = equals == std::string::npos ? "" : option.substr(equals + 1);
    if (equals == std::string::npos && i + 1 < global_options.size()) value = global_options[++i];
    setenv(name == "--simd" ? "SAMEBITS_SIMD" : "SAMEBITS_NUM_THREADS", value.c_str(), 1);
  }
  // The console script of the Python package names its own interpreter; otherwise the first python3 on PATH.
  const char* python = std::getenv("SAMEBITS_PYTHON");
  if (python == nullptr || *python == '\0') python = "python3";
  std::vector<std::string> words{python, "-m", "samebits.serve"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp(python, argv.data());
  std::fprintf(stderr,
               "samebits: serve runs '%s -m samebits.serve' (Python 3 with samebits and fastapi + uvicorn: "
               "pip install \"samebits[serve]\"), which could not start: %s\n",
               python, std::strerror(errno));
  return kExitRefused;
}

}  // namespace samebits::cli
