//===- AtomicFile.cpp - Crash-safe file writes ----------------------------===//

#include "AtomicFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

bool zest::writeFileAtomically(const std::string &path,
                               const std::vector<Chunk> &chunks,
                               std::string &error) {
  std::string temp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    error = "cannot create '" + temp + "': " + std::strerror(errno);
    return false;
  }
  bool ok = true;
  for (const Chunk &chunk : chunks) {
    const char *p = static_cast<const char *>(chunk.data);
    for (size_t left = chunk.size; ok && left;) {
      ssize_t written = ::write(fd, p, left);
      ok = written > 0;
      if (ok) {
        p += written;
        left -= size_t(written);
      }
    }
  }
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    error = "cannot write '" + path + "': " + std::strerror(errno);
    std::remove(temp.c_str());
    return false;
  }
  return syncParentFolder(path, error);
}

bool zest::syncParentFolder(const std::string &path, std::string &error) {
  size_t slash = path.find_last_of('/');
  std::string parent = slash == std::string::npos ? "."
                       : slash == 0               ? "/"
                                                  : path.substr(0, slash);
  int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  bool ok = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0)
    ::close(fd);
  if (!ok)
    error = "cannot sync folder '" + parent + "': " + std::strerror(errno);
  return ok;
}
