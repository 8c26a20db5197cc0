// Removal of a finished job's leftover shared-memory segments (shm_cleanup.hpp).
#include "bindings/cli/chorusrun/shm_cleanup.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>

namespace chorus::chorusrun {

int remove_job_segments(const std::string& job_id_hex, const std::string& dir) {
  if (job_id_hex.empty()) return 0;
  char* end = nullptr;
  uint64_t id = std::strtoull(job_id_hex.c_str(), &end, 16);
  if (!end || *end != '\0') return 0;
  std::ostringstream prefix;  // the ranks' own spelling of the id (runtime/transport/shm/lanes.cpp)
  prefix << "chorus-" << std::hex << id << "-";
  const std::string want = prefix.str();
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  const uid_t me = ::getuid();
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(want, 0) != 0) continue;
    std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != me) continue;
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace chorus::chorusrun
