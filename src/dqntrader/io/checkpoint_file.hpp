// Checkpoint files (.dqnckpt): named sections, each with its own checksum.
//
// Layout: "DQNCKPT\0", u32 format (the version of what the sections hold: its writer's, e.g.
// train/run_checkpoint.hpp), u32 section count; per section: u16 name length,
// name, u64 size, u64 XXH64 checksum of the bytes, the bytes; then a u64 checksum of
// everything before it. Written atomically (temporary file, fsync, rename, fsync of the
// directory): a checkpoint is complete or absent.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dqntrader::io {

struct Section {
  std::string name;
  std::string bytes;
};

/// A section's name and bytes where they lie (io/snapshot.hpp).
struct SectionView {
  std::string_view name;
  std::string_view bytes;
};

/// Throws Error when the file cannot be written completely. The sections' bytes go to the
/// file from where they lie, a section at a time.
void write_sections(const std::string& path, std::uint32_t format,
                    const std::vector<SectionView>& sections);
void write_sections(const std::string& path, std::uint32_t format,
                    const std::vector<Section>& sections);

/// Reads and verifies every checksum; InputError names the file and what is wrong. format, when
/// given, receives the file's format.
std::vector<Section> read_sections(const std::string& path, std::uint32_t* format = nullptr);

/// The section called name; InputError naming the file when it is missing.
const Section& find_section(const std::vector<Section>& sections, const std::string& name,
                            const std::string& path);

}  // namespace dqntrader::io
