// A checkpoint's sections taken at one moment and written later, while the work goes on: the
// device's buffers copied into pinned host memory (asynchronous copies, one fence), the host's
// sections beside them. The pinned memory comes from a pool and goes back to it when the
// snapshot is destroyed (once written), so that one checkpoint after another reuses it rather
// than allocating, zeroing and page-faulting fresh host memory each time.
#pragma once

#include <Kokkos_Core.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/io/checkpoint_file.hpp"

namespace dqntrader::io {

/// Pinned host buffers for snapshots: at most `buffers` are held by snapshots at once (two:
/// one being written while the next is taken).
class SnapshotPool {
 public:
  explicit SnapshotPool(std::size_t buffers = 2);
  SnapshotPool(const SnapshotPool&) = delete;
  SnapshotPool& operator=(const SnapshotPool&) = delete;

 private:
  friend class Snapshot;
  struct State;
  std::shared_ptr<State> m_state;
};

class Snapshot {
 public:
  /// The device's bytes go into memory of the snapshot's own.
  Snapshot() = default;
  /// The device's bytes go into a buffer of pool's (which must outlive the snapshot's copies
  /// being taken; the buffer goes back when the snapshot is destroyed).
  explicit Snapshot(SnapshotPool& pool) : m_pool(&pool) {}
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
  ~Snapshot();

  /// Room for `bytes` bytes of copies from the device, once per snapshot: a pool's buffer
  /// not held by another snapshot (waiting for one to come back), grown where it is smaller.
  /// Returns the first byte.
  char* reserve(std::size_t bytes);
  /// A section of the reserved bytes [offset, offset + bytes), filled by the caller's copies.
  void add_reserved(std::string name, std::size_t offset, std::size_t bytes);
  /// A section of host bytes.
  void add(Section section);

  /// The sections in the order they were added (views into the snapshot).
  std::vector<SectionView> sections() const;
  /// The sections, copied.
  std::vector<Section> copy() const;
  /// The seconds reserve() waited for a pool's buffer to come back.
  double waited() const { return m_waited; }

 private:
  struct Entry {
    std::string name;
    std::string host;        // a host section's bytes
    std::size_t offset = 0;  // a reserved section's place
    std::size_t bytes = 0;
    bool reserved = false;
  };
  SnapshotPool* m_pool = nullptr;
  std::shared_ptr<SnapshotPool::State> m_from;  // the pool the buffer goes back to
  std::size_t m_buffer = 0;                     // which of its buffers
  Kokkos::View<char*, PinnedHostMemory> m_own;  // without a pool
  char* m_data = nullptr;
  double m_waited = 0;
  std::vector<Entry> m_entries;
};

}  // namespace dqntrader::io
