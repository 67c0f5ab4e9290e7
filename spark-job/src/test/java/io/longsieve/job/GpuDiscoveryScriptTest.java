package io.longsieve.job;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** conf/getGpusResources.sh, run as Spark runs it, with a stand-in nvidia-smi on the PATH. */
class GpuDiscoveryScriptTest {

  static final Path SCRIPT = Path.of("..", "conf", "getGpusResources.sh").toAbsolutePath().normalize();

  @TempDir
  Path bin;

  /** Runs the script with {@code env} added (a null value removes the variable); returns exit code and stdout. */
  private String[] run(Map<String, String> env) throws IOException, InterruptedException {
    Path smi = bin.resolve("nvidia-smi");
    Files.writeString(smi, "#!/bin/sh\necho 0\necho 1\necho 2\n");
    smi.toFile().setExecutable(true);
    ProcessBuilder pb = new ProcessBuilder("bash", SCRIPT.toString());
    pb.environment().remove("CUDA_VISIBLE_DEVICES");
    pb.environment().put("PATH", bin + ":/usr/bin:/bin");
    env.forEach((k, v) -> {
      if (v == null) pb.environment().remove(k);
      else pb.environment().put(k, v);
    });
    Process p = pb.redirectError(ProcessBuilder.Redirect.DISCARD).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    return new String[] {Integer.toString(p.waitFor()), out};
  }

  @Test
  void reportsEveryGpuNvidiaSmiSees() throws Exception {
    assertEquals("{\"name\": \"gpu\", \"addresses\": [\"0\",\"1\",\"2\"]}", run(Map.of())[1]);
  }

  @Test
  void reportsCudaVisibleDevicesInOrderSoAddressesMatchCudaNumbering() throws Exception {
    assertEquals("{\"name\": \"gpu\", \"addresses\": [\"2\",\"3\"]}", run(Map.of("CUDA_VISIBLE_DEVICES", "2,3"))[1]);
    assertEquals("{\"name\": \"gpu\", \"addresses\": [\"GPU-abc\"]}", run(Map.of("CUDA_VISIBLE_DEVICES", "GPU-abc"))[1]);
  }

  @Test
  void aLimitKeepsTheFirstGpusAndNoGpuIsAnError() throws Exception {
    assertEquals("{\"name\": \"gpu\", \"addresses\": [\"0\"]}", run(Map.of("LONGSIEVE_GPU_LIMIT", "1"))[1]);
    assertEquals("1", run(Map.of("PATH", "/usr/bin:/bin"))[0], "no nvidia-smi and no CUDA_VISIBLE_DEVICES");
    assertEquals("1", run(Map.of("CUDA_VISIBLE_DEVICES", "-1", "PATH", "/usr/bin:/bin"))[0]);
  }
}
