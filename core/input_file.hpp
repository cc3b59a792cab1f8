#pragma once
// Files a user names (configs, words files, .npy inputs) are read only when they are regular files:
// a directory, a device such as /dev/zero or a FIFO is an input error, never a read that waits for a
// writer or does not end (SPEC 9).
#include <cstdint>
#include <string>

namespace tilemix {

// The size in bytes of the regular file at `path`. Throws InputError(path, ...) when it is missing
// or not a regular file; `expected` says what it should be ("a JSON file").
int64_t regular_file_size(const std::string& path, const std::string& expected);

}  // namespace tilemix
