#include "dqntrader/io/snapshot.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "dqntrader/core/error.hpp"

namespace dqntrader::io {

struct SnapshotPool::State {
  std::mutex mutex;
  std::condition_variable returned;
  std::vector<Kokkos::View<char*, PinnedHostMemory>> buffers;  // made when first needed
  std::vector<bool> held;
};

SnapshotPool::SnapshotPool(std::size_t buffers) : m_state(std::make_shared<State>()) {
  m_state->buffers.resize(buffers);
  m_state->held.assign(buffers, false);
}

Snapshot::~Snapshot() {
  if (!m_from)
    return;
  {
    std::lock_guard<std::mutex> lock(m_from->mutex);
    m_from->held[m_buffer] = false;
  }
  m_from->returned.notify_all();
}

char* Snapshot::reserve(std::size_t bytes) {
  if (m_data != nullptr)
    throw Error("Snapshot::reserve: called twice");
  using Buffer = Kokkos::View<char*, PinnedHostMemory>;
  auto allocate = [](std::size_t size) {
    return Buffer(Kokkos::view_alloc(Kokkos::WithoutInitializing, "dqntrader::io::snapshot"), size);
  };
  if (m_pool == nullptr) {
    m_own = allocate(bytes);
    m_data = m_own.data();
    return m_data;
  }
  SnapshotPool::State& pool = *m_pool->m_state;
  const auto start = std::chrono::steady_clock::now();
  {
    std::unique_lock<std::mutex> lock(pool.mutex);
    pool.returned.wait(lock, [&] {
      return std::find(pool.held.begin(), pool.held.end(), false) != pool.held.end();
    });
    // Of the free buffers, one large enough, else the largest (grown below).
    std::size_t pick = pool.held.size();
    for (std::size_t i = 0; i < pool.held.size(); ++i) {
      if (pool.held[i])
        continue;
      if (pick == pool.held.size() || (pool.buffers[pick].extent(0) < bytes &&
                                       pool.buffers[i].extent(0) > pool.buffers[pick].extent(0)))
        pick = i;
    }
    pool.held[pick] = true;
    m_buffer = pick;
  }
  m_waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m_from = m_pool->m_state;
  // The buffer is this snapshot's alone until it goes back: grown outside the lock, with room
  // for the next snapshots' growth (the replay rings fill epoch after epoch).
  Buffer& buffer = pool.buffers[m_buffer];
  if (buffer.extent(0) < bytes) {
    buffer = Buffer();
    buffer = allocate(bytes + bytes / 4);
  }
  m_data = buffer.data();
  return m_data;
}

void Snapshot::add_reserved(std::string name, std::size_t offset, std::size_t bytes) {
  Entry e;
  e.name = std::move(name);
  e.offset = offset;
  e.bytes = bytes;
  e.reserved = true;
  m_entries.push_back(std::move(e));
}

void Snapshot::add(Section section) {
  Entry e;
  e.name = std::move(section.name);
  e.host = std::move(section.bytes);
  m_entries.push_back(std::move(e));
}

std::vector<SectionView> Snapshot::sections() const {
  std::vector<SectionView> out;
  for (const Entry& e : m_entries) {
    if (e.reserved)
      out.push_back({e.name, std::string_view(m_data + e.offset, e.bytes)});
    else
      out.push_back({e.name, e.host});
  }
  return out;
}

std::vector<Section> Snapshot::copy() const {
  std::vector<Section> out;
  for (const SectionView& s : sections())
    out.push_back({std::string(s.name), std::string(s.bytes)});
  return out;
}

}  // namespace dqntrader::io
