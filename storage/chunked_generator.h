// `tessel generate graph --chunked --out DIR`: the synthetic graph of storage/generator.h written in DGL's
// chunked graph format (storage/chunked_import.h) by every rank of an mpirun, each its own chunks, so that
// a graph larger than one machine's memory can be made: no rank holds more than its chunks, and those are
// streamed to disk.
//
// Every draw is a function of (seed, stream, the node's or the edge's global index) alone, so the graph
// is the same whatever the rank count: a node's class, split and features hash its global id (node types
// concatenated); edge e of relation r hashes (r, e): a uniform source, and with probability
// planted_fraction a destination of class pi_r(class(source)) found by rejection (at most 64 draws,
// then the last), otherwise a uniform one. The structure is GenerateGraph's (types, relations and their
// types, the class permutations and means, the feature noise, the split fractions), its draws are not:
// this is a different graph of the same law. Duplicate edges are kept, as real chunked data has them;
// no inverse or self-loop relation is written (DGL users add reverse edges themselves): ask for them
// when importing or partitioning (--add-inverse, --add-self-loop).
//
// Rank k of P writes chunk k of everything: edges/rel<r>-<k>.npy ([E, 2] int64, type-local ids) holding
// edges [m_r k / P, m_r (k + 1) / P) of relation r, and node_data/type<t>-<key>-<k>.npy (feat float32,
// label int64, train_mask / val_mask / test_mask bool) for rows [n_t k / P, n_t (k + 1) / P) of type t.
// ChunkedGraphMetadata gives the metadata.json naming all of them, computed from the options alone.
// Failure: kUsage for bad options; kStorage naming the file for a write error.
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "storage/generator.h"

namespace tessel::storage {

std::string ChunkedGraphMetadata(const GenerateOptions& options, int ranks);
Status WriteChunkedShare(const GenerateOptions& options, const std::string& dir, int rank, int ranks);

}  // namespace tessel::storage
