#pragma once
// Progress of a sweep on stderr: a bar redrawn in place on a terminal, one line per step when
// stderr is a file or a pipe (so logs stay readable).
#include <mutex>
#include <string>

namespace tilemix::app {

class Progress {
 public:
  explicit Progress(int total);
  // Reports that step `done` of `total` is starting, with a short label.
  void step(int done, const std::string& label);
  // Ends the bar's line on a terminal.
  void finish();

 private:
  int total_;
  bool terminal_;
  std::mutex mutex_;
};

}  // namespace tilemix::app
