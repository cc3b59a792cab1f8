#pragma once
// Runs a shell command as a user would, for the tests of the apps: its exit code and its stdout
// and stderr together.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace tilemix::testing {

struct Run {
  int code = -1;
  std::string out;  // stdout + stderr
};

inline Run run(const std::string& cmd) {
  Run r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace tilemix::testing
