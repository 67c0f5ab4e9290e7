package io.longsieve.job;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.resource.ResourceInformation;

/**
 * Turns the GPU address Spark assigned to a task into the CUDA device ordinal the engine binds to.
 *
 * <p>Failure semantics: runs on executors; a GPU address that cannot be mapped (listed nowhere in a
 * multi-device {@code CUDA_VISIBLE_DEVICES}, an empty or disabled {@code CUDA_VISIBLE_DEVICES}) throws
 * {@link IllegalStateException} with both values in the message, failing the task: guessing device 0
 * would put several executors on one GPU (the Spark NLP failure mode). No GPU resource at all (local
 * mode, CPU clusters) is not an error: the ordinal is -1 and the engine picks its default device.
 *
 * <p>Why a remap is needed: Spark's addresses come from the discovery script (conf/getGpusResources.sh
 * prints what {@code nvidia-smi} calls the GPUs: physical indices, or UUIDs). CUDA numbers only the
 * devices that {@code CUDA_VISIBLE_DEVICES} lets it see, from 0. So:
 * <ul>
 *   <li>not set: the address is the ordinal (with {@code CUDA_DEVICE_ORDER=PCI_BUS_ID}, which
 *       conf/spark-defaults.conf sets, so CUDA and nvidia-smi count alike);
 *   <li>set, and the address is listed (index or UUID): the ordinal is its position in the list, e.g.
 *       {@code CUDA_VISIBLE_DEVICES=2,3} and address "3" → ordinal 1;
 *   <li>set to exactly one device the address is not in: the container was given one GPU and
 *       renumbered it (YARN and Kubernetes isolation report the host index) → ordinal 0;
 *   <li>set to "", "-1" or "NoDevFiles": CUDA sees no GPU → error.
 * </ul>
 */
public final class GpuBinding {
  private GpuBinding() {}

  /** Spark's resource name for GPUs (spark.executor.resource.gpu.*). */
  public static final String GPU = "gpu";

  /**
   * The CUDA ordinal for this task's GPU, or -1 when the task holds no GPU (or runs outside a task).
   * Several addresses (a task GPU amount above 1): the first is used, since one engine drives one GPU.
   */
  public static int forCurrentTask() {
    TaskContext tc = TaskContext.get();
    if (tc == null) return -1;
    return ordinalFor(tc.resourcesJMap(), System.getenv("CUDA_VISIBLE_DEVICES"));
  }

  /** The ordinal for a resource map as Spark gives it (TaskContext or an ExecutorPlugin's PluginContext). */
  public static int ordinalFor(Map<String, ResourceInformation> resources, String cudaVisibleDevices) {
    ResourceInformation gpu = resources == null ? null : resources.get(GPU);
    if (gpu == null || gpu.addresses().length == 0) return -1;
    return ordinal(gpu.addresses()[0], cudaVisibleDevices);
  }

  /**
   * The CUDA ordinal of the device Spark calls {@code address}, given the process's
   * {@code CUDA_VISIBLE_DEVICES} (null when unset).
   */
  public static int ordinal(String address, String cudaVisibleDevices) {
    String addr = address.trim();
    if (cudaVisibleDevices == null) return parseIndex(addr, null);
    List<String> visible = visibleDevices(cudaVisibleDevices);
    if (visible.isEmpty()) {
      throw new IllegalStateException("Spark assigned GPU " + addr + " but CUDA_VISIBLE_DEVICES='" + cudaVisibleDevices
          + "' hides every GPU from CUDA; unset it or list the GPU");
    }
    int at = visible.indexOf(addr);
    if (at >= 0) return at;
    if (visible.size() == 1) return 0; // an isolated container renumbers its one GPU to 0
    throw new IllegalStateException("Spark assigned GPU " + addr + " but it is not among CUDA_VISIBLE_DEVICES='"
        + cudaVisibleDevices + "'; make the discovery script report the same ids as CUDA_VISIBLE_DEVICES");
  }

  /** CUDA's reading of the variable: comma-separated, and nothing visible for "", "-1" or NoDevFiles. */
  static List<String> visibleDevices(String cvd) {
    String v = cvd.trim();
    if (v.isEmpty() || v.equals("-1") || v.equalsIgnoreCase("NoDevFiles")) return List.of();
    List<String> out = new ArrayList<>();
    for (String s : v.split(",")) {
      String t = s.trim();
      if (t.isEmpty() || t.startsWith("-")) break; // CUDA stops at the first invalid entry
      out.add(t);
    }
    return out;
  }

  private static int parseIndex(String addr, String cvd) {
    try {
      int i = Integer.parseInt(addr);
      if (i < 0) throw new NumberFormatException();
      return i;
    } catch (NumberFormatException e) {
      throw new IllegalStateException("Spark assigned GPU '" + addr + "', which is not a device index, and "
          + "CUDA_VISIBLE_DEVICES is " + (cvd == null ? "unset" : "'" + cvd + "'")
          + "; set CUDA_VISIBLE_DEVICES to the UUIDs the discovery script reports, or make it report indices");
    }
  }

  /** For logs: the addresses of a resource map, e.g. "gpu=[0]". */
  static String describe(Map<String, ResourceInformation> resources) {
    ResourceInformation gpu = resources == null ? null : resources.get(GPU);
    return gpu == null ? "no gpu resource" : "gpu=" + Arrays.toString(gpu.addresses());
  }
}
