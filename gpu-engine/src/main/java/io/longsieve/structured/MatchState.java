package io.longsieve.structured;

import io.longsieve.structured.JsonMatcher.Config;
import java.util.Set;

/**
 * The set of {@link JsonMatcher} configurations after some bytes: equal sets are equal states, so
 * the mask cache can key on them.
 */
final class MatchState {

  private final Set<Config> configs;
  private final int hash;

  MatchState(Set<Config> configs) {
    this.configs = Set.copyOf(configs);
    this.hash = this.configs.hashCode();
  }

  Set<Config> configs() {
    return configs;
  }

  @Override
  public boolean equals(Object o) {
    return this == o || o instanceof MatchState m && m.hash == hash && m.configs.equals(configs);
  }

  @Override
  public int hashCode() {
    return hash;
  }
}
