package io.longsieve.cuda.driver;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import jcuda.NativePointerObject;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * The raw device address a JCuda {@link CUdeviceptr} stands for (its native pointer plus the byte
 * offset of {@code withByteOffset}), for packing kernel arguments into one buffer. JCuda keeps both
 * behind protected accessors; they are opened once by reflection (JCuda sits on the class path).
 */
public final class DeviceAddress {
  private DeviceAddress() {}

  private static final MethodHandle NATIVE;
  private static final MethodHandle OFFSET;

  static {
    try {
      var n = NativePointerObject.class.getDeclaredMethod("getNativePointer");
      n.setAccessible(true);
      var o = Pointer.class.getDeclaredMethod("getByteOffset");
      o.setAccessible(true);
      MethodHandles.Lookup l = MethodHandles.lookup();
      NATIVE = l.unreflect(n).asType(MethodType.methodType(long.class, CUdeviceptr.class));
      OFFSET = l.unreflect(o).asType(MethodType.methodType(long.class, CUdeviceptr.class));
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  public static long of(CUdeviceptr p) {
    try {
      return (long) NATIVE.invokeExact(p) + (long) OFFSET.invokeExact(p);
    } catch (Throwable t) {
      throw new IllegalStateException("cannot read a JCuda device pointer", t);
    }
  }
}
